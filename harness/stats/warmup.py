"""Warm-up deletion: where a series' initial transient ends, by MSER-5.

**MSER-5** (the Marginal Standard Error Rule on batch means of 5; White, "An effective truncation heuristic for
bias reduction in simulation output", *Simulation* 69(6), 1997; White, Cobb & Spratt, WSC 2000; Franklin & White,
"Stationarity tests and MSER-5", WSC 2008). The series ``x_1 .. x_n`` (in the order the observations were made) is
cut into ``m = floor(n / 5)`` consecutive batches of 5 (an incomplete last batch is left out of the rule, not of the
sample) with means ``Z_1 .. Z_m``. For each candidate truncation of ``d`` batches,

    MSER(d) = 1 / (m - d)^2 * sum_{j = d+1}^{m} (Z_j - Zbar(d))^2,      Zbar(d) = mean of Z_{d+1} .. Z_m,

the squared standard error of the mean of what is left, which falls while the deleted batches are biased (they move
``Zbar`` and add variance) and rises once deleting only throws away steady-state data. The cut is ``5 d*``
observations with ``d*`` the smallest minimiser over ``0 <= d <= floor(m / 2)``: the rule is only trusted in the
first half (Franklin & White: a minimum in the second half means the series is too short to show a steady state,
and a near-empty remainder makes ``MSER`` meaningless). That case is reported (``settled = False``) and the cut is
the best in the first half.

Below :data:`MIN_BATCHES` batches (50 observations) the rule has too little to compare and nothing is cut.

Hand-written with numpy (suffix sums: one pass, no loop over ``d``): the one MSER package on PyPI, ``pymser``, is
built for the equilibration of Grand Canonical Monte Carlo adsorption runs, not a general series API; the rule is the
formula above, tested against a direct evaluation of it in ``tests/unit/stats/test_warmup.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
BATCH = 5
MIN_BATCHES = 10
RULE = "MSER-5"


@dataclass(frozen=True)
class Truncation:
    """Where MSER-5 cuts a series: ``cut`` observations from the start (a multiple of 5).

    ``batches``: the batch means the rule compared; ``settled``: the unrestricted minimum lies in the first half
    (a steady state is shown); ``note``: why nothing was cut, or why the cut is not settled."""

    cut: int
    n: int
    batches: int
    settled: bool
    note: str | None = None


def mser_curve(batch_means: F64) -> F64:
    """``MSER(d)`` for ``d = 0 .. m - 1`` of the batch means ``Z_1 .. Z_m`` (see module docs)."""
    z = np.asarray(batch_means, dtype=np.float64)
    m = len(z)
    if m == 0:
        return np.zeros(0)
    # Suffix sums: s1[d] = sum_{j >= d} z_j, s2[d] = sum z_j^2, k = m - d values left. Centered first so the
    # sums of squares do not lose precision on large offsets (latencies in ms around a large mean).
    zc = z - z.mean()
    s1 = np.cumsum(zc[::-1])[::-1]
    s2 = np.cumsum((zc * zc)[::-1])[::-1]
    k = np.arange(m, 0, -1, dtype=np.float64)
    ss = np.maximum(s2 - s1 * s1 / k, 0.0)
    return np.asarray(ss / (k * k), dtype=np.float64)


def mser5(series: npt.ArrayLike) -> Truncation:
    """The MSER-5 truncation of ``series`` (NaN not allowed: pass the observations that exist, in order)."""
    x = np.asarray(series, dtype=np.float64)
    n = len(x)
    if np.isnan(x).any():
        raise ValueError("mser5: the series has NaN; pass only the observations that exist, in their order")
    m = n // BATCH
    if m < MIN_BATCHES:
        return Truncation(cut=0, n=n, batches=m, settled=False,
                          note=f"{n} observations: MSER-5 needs {MIN_BATCHES * BATCH} to compare; nothing cut")
    z = x[: m * BATCH].reshape(m, BATCH).mean(axis=1)
    curve = mser_curve(z)
    half = m // 2
    d_star = int(np.argmin(curve[: half + 1]))  # argmin: the smallest minimiser
    # The unrestricted minimum, ignoring the last few batches where MSER's denominator vanishes (k < MIN_BATCHES/2).
    tail = max(half + 1, m - MIN_BATCHES // 2)
    settled = bool(curve[: half + 1].min() <= curve[half + 1: tail].min()) if tail > half + 1 else True
    note = None if settled else (f"MSER-5's minimum lies in the series' second half: no steady state is shown in "
                                 f"{n} observations; cut at the first half's minimum")
    return Truncation(cut=d_star * BATCH, n=n, batches=m, settled=settled, note=note)
