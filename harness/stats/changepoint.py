"""Change points in one measure's history across runs: where did its level move, how sure is that, and by how much.

The rule (:func:`detect`), for a history of positive values in run order (oldest first):

1. Fewer than :data:`MIN_RUNS` values: nothing is tested (``DriftTest.tested`` is False and its note says so).
2. Scale: the values' logarithms (a shift is a ratio, and noise of a given CV looks the same at any level), as
   residuals from their median in units of a robust noise scale (the median absolute successive difference, which a
   level shift moves only once), clipped at :data:`CLIP` so that one wild run cannot make a level on its own.
3. Proposals: :class:`ruptures.Pelt` (exact minimiser of the penalised cost) with the ``l2`` cost, segments of at
   least :data:`MIN_SEGMENT` runs, penalty ``2 ln n`` (BIC for one location and one level per change, the residuals
   having unit variance).
4. Significance, which ruptures does not give: each proposal, moved to the best split of its window (from the
   change point before it to the one after it), is tested in that window by a permutation test of the largest
   standardised CUSUM statistic over every split (``max_t S_t^2 n / (t (n - t) var)``, the l2 cost's own gain), so
   choosing the split is part of the null distribution: ``p = (1 + #{permuted >= observed}) / (1 + B)`` with B =
   :data:`PERMUTATIONS`, seeded from the caller's seed and the window, so the same history always gives the same
   p-values (an index rebuilt every night does not flicker).
5. A proposal whose p-value exceeds ``alpha`` (default :data:`ALPHA`) or whose windows' medians differ by less than
   :data:`MIN_SHIFT` (a shift too small to act on, or one outlier) is dropped, the least significant first; its
   neighbours' windows merge and every test is rerun until each change point left stands. Each comes with its
   position (the first run at the new level), its p-value, and the medians of the raw values before and after.

Measured by ``python -m tools.bench.drift`` (200 seeded histories per figure, each tested at 0.05/9): no
false positive in flat histories of 12-30 runs at 3-5% CV (1.5% at 60 runs, 5% CV); a 20% shift in the middle of 20+
runs found at its run (within one) 99-100% of the time, five runs before the newest 97-100%, three before 78-96%;
a whole scenario of nine flat histories raises an alarm 1.5-4.5% of the time (its family alpha is 0.05).

Why ruptures and not MongoDB's ``signal-processing-algorithms`` (E-Divisive with a permutation test, what MongoDB's
CI uses for this): its last release (2.1.6, December 2024) pins ``numpy<2``, ``gevent<25``, ``setuptools<71`` and
Python ``~3.11``; this harness runs on numpy 2 (pandas 3 requires it) and gevent 25+ (locust 2.47 requires
>= 24.11, pip resolves 26), so it cannot be installed beside them, and Apache Otava (ex-Hunter), its best-known other
user, replaced it with its own code in 2025. ruptures (1.1.10, September 2025, BSD-2, wheels for CPython 3.9-3.13)
pins nothing but numpy and scipy. Its searches need a penalty and give no p-value, hence step 4, which is
E-Divisive's own significance procedure (a permutation test per split) applied to ruptures' segmentation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import ruptures as rpt  # type: ignore[import-untyped]
from numpy.typing import NDArray

ALPHA = 0.01          # largest p-value that counts as a change point (per history; callers split a family's alpha)
PERMUTATIONS = 1999   # permutations per test: the smallest p-value is 1/2000
MIN_SEGMENT = 3       # runs on each side of a change point, at least
MIN_RUNS = 12         # shorter histories are not tested (10 runs split 5/5 give at best p = 2/252 = 0.008)
MIN_SHIFT = 0.05      # a change of the median by less than 5% is not claimed, however significant
CLIP = 3.0            # residuals beyond 3 robust standard deviations count as 3 (one wild run cannot make a shift)
METHOD = (f"ruptures PELT (l2 cost on clipped log residuals, penalty 2 ln n, segments of at least {MIN_SEGMENT} runs); "
          f"a change point stands when a permutation test of the CUSUM maximum in its window ({PERMUTATIONS} "
          f"permutations) gives p <= alpha and the median moved by at least {MIN_SHIFT:.0%}")


@dataclass(frozen=True)
class ChangePoint:
    """A level shift: ``index`` is the first value of the new level; medians of the windows on either side."""

    index: int
    p_value: float
    before_median: float
    after_median: float
    n_before: int
    n_after: int

    @property
    def ratio(self) -> float:
        """After / before (both medians are positive)."""
        return self.after_median / self.before_median


@dataclass(frozen=True)
class DriftTest:
    """The outcome for one history: whether it was tested, and the change points found (oldest first)."""

    n: int
    tested: bool
    change_points: list[ChangePoint] = field(default_factory=list)
    note: str = ""


def too_few(n: int, min_runs: int = MIN_RUNS) -> str:
    """The sentence an untested history gets."""
    return f"too few runs ({n}) to test for drift (at least {min_runs} needed)"


def _max_statistic(centred: NDArray[np.float64], min_size: int) -> NDArray[np.float64]:
    """Per row of centred values: the largest standardised CUSUM^2 over splits leaving ``min_size`` on each side."""
    n = centred.shape[-1]
    var = float(np.mean(centred[0] ** 2))
    if var <= 0.0:
        return np.zeros(centred.shape[0])
    t = np.arange(min_size, n - min_size + 1)
    sums = np.cumsum(centred, axis=-1)[:, t - 1]
    return np.asarray(np.max(sums**2 * n / (t * (n - t)) / var, axis=-1), dtype=np.float64)


def _split(centred: NDArray[np.float64], min_size: int) -> int:
    """Where the window splits best (the argmax of the statistic)."""
    n = len(centred)
    t = np.arange(min_size, n - min_size + 1)
    sums = np.cumsum(centred)[t - 1]
    return int(t[np.argmax(sums**2 * n / (t * (n - t)))])


def _clipped(y: NDArray[np.float64], sigma: float) -> NDArray[np.float64]:
    """Residuals from the median in robust standard deviations, clipped at :data:`CLIP`."""
    return np.asarray(np.clip((y - float(np.median(y))) / sigma, -CLIP, CLIP), dtype=np.float64)


def permutation_p(window: NDArray[np.float64], sigma: float, *, min_size: int = MIN_SEGMENT,
                  permutations: int = PERMUTATIONS, seed: int = 0) -> float:
    """p-value of "no change in this window" against "one change somewhere in it" (the CUSUM maximum of the
    window's clipped residuals; ``sigma`` is the history's noise scale)."""
    n = len(window)
    if n < 2 * min_size or sigma <= 0.0:
        return 1.0
    z = _clipped(window, sigma)
    centred = z - float(np.mean(z))
    observed = _max_statistic(centred[np.newaxis, :], min_size)[0]
    if observed <= 0.0:
        return 1.0
    rng = np.random.default_rng(seed)
    null = _max_statistic(rng.permuted(np.tile(centred, (permutations, 1)), axis=1), min_size)
    return float((1 + np.count_nonzero(null >= observed * (1 - 1e-9))) / (1 + permutations))


def noise_scale(y: NDArray[np.float64]) -> float:
    """A robust standard deviation from successive differences (a level shift moves only one of them)."""
    sigma = float(np.median(np.abs(np.diff(y)))) / (0.6745 * math.sqrt(2.0))
    return sigma if sigma > 0.0 else float(np.std(y))


def _proposals(y: NDArray[np.float64], sigma: float, min_size: int) -> list[int]:
    if sigma <= 0.0:
        return []
    n = len(y)
    algo = rpt.Pelt(model="l2", min_size=min_size, jump=1).fit(_clipped(y, sigma))
    ends: list[int] = algo.predict(pen=2.0 * math.log(n))
    return [int(e) for e in ends[:-1]]


def _relocate(y: NDArray[np.float64], sigma: float, cps: list[int], min_size: int) -> list[int]:
    """Each change point moved to the best split of its window (the windows' bounds are its neighbours)."""
    out = list(cps)
    for k in range(len(out)):
        a = out[k - 1] if k else 0
        b = out[k + 1] if k + 1 < len(out) else len(y)
        z = _clipped(y[a:b], sigma)
        out[k] = a + _split(z - float(np.mean(z)), min_size)
    return out


def detect(values: Sequence[float] | NDArray[np.float64], *, alpha: float = ALPHA, min_runs: int = MIN_RUNS,
           min_size: int = MIN_SEGMENT, min_shift: float = MIN_SHIFT, permutations: int = PERMUTATIONS,
           seed: int = 0) -> DriftTest:
    """Change points of ``values`` (positive finite numbers in run order); see the module docstring for the rule."""
    x = np.asarray([float(v) for v in values], dtype=np.float64)
    if not np.all(np.isfinite(x)) or np.any(x <= 0.0):
        raise ValueError("detect() takes positive finite values only (leave missing runs out)")
    n = len(x)
    needed = max(min_runs, 2 * min_size)
    if n < needed:
        return DriftTest(n=n, tested=False, note=too_few(n, needed))
    y = np.log(x)
    sigma = noise_scale(y)
    cps = _proposals(y, sigma, min_size)
    while True:
        cps = _relocate(y, sigma, cps, min_size)
        bounds = [0, *cps, n]
        found: list[ChangePoint] = []
        worst: tuple[float, int] | None = None
        for k, t in enumerate(cps):
            a, b = bounds[k], bounds[k + 2]
            p = permutation_p(y[a:b], sigma, min_size=min_size, permutations=permutations,
                              seed=(seed * 1_000_003 + a * 1009 + b) % 2**63)
            before, after = float(np.median(x[a:t])), float(np.median(x[t:b]))
            score = p if abs(math.log(after / before)) >= math.log1p(min_shift) else math.inf
            if score > alpha and (worst is None or score > worst[0]):
                worst = (score, k)
            found.append(ChangePoint(index=t, p_value=p, before_median=before, after_median=after,
                                     n_before=t - a, n_after=b - t))
        if worst is None:
            return DriftTest(n=n, tested=True, change_points=found)
        del cps[worst[1]]
