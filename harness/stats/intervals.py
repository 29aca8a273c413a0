"""Confidence intervals for percentiles (distribution-free) and for ratios between arms (bootstrap).

**Percentiles** — order-statistic intervals with exact binomial coverage (Hahn & Meeker, *Statistical Intervals*,
ch. 5): with ``B ~ Binomial(n, q)`` the number of samples at or below the true q-quantile, the interval
``[x(l), x(u)]`` (1-based ranks) covers it with probability ``P(l <= B < u) >= confidence``. The ranks come from
``scipy.stats.binom``; nothing is assumed about the latency distribution. When the sample cannot bound the
quantile from above (``u > n``: a p99 from 40 requests) the percentile is **unresolved** and reported as "at least
``x(l)``"; from below likewise ("at most"). An unresolved percentile is never compared as if it were exact.

**Ratios** — a percentile bootstrap (``scipy.stats.bootstrap``) of the ratio of two quantiles, or of two sums over
fixed durations (throughput), from two independent samples, with a seed derived from the data so a rebuild
reproduces it. A ratio is only computed when both quantiles are resolved at the ratio's confidence: a bootstrap
of an order statistic the sample cannot resolve (the maximum) is meaningless.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.stats import binom, bootstrap

from harness.schema.intervals import QuantileCI, RatioCI

F64 = npt.NDArray[np.float64]
DEFAULT_CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2000
QUANTILE_METHOD = "order-statistic (exact binomial, distribution-free)"
RATIO_METHOD = "percentile bootstrap"


@dataclass(frozen=True)
class Ranks:
    """1-based ranks of the interval ends; 0 = no lower end in the sample, n+1 = no upper end."""

    lower: int
    upper: int
    n: int

    @property
    def resolved(self) -> bool:
        return self.lower >= 1 and self.upper <= self.n


@functools.lru_cache(maxsize=4096)
def quantile_ranks(n: int, q: float, confidence: float = DEFAULT_CONFIDENCE) -> Ranks:
    """Ranks ``(l, u)`` with ``P(x(l) <= xi_q <= x(u)) >= confidence`` (two-sided, equal tails)."""
    if n <= 0:
        return Ranks(0, 1, 0)
    tail = (1.0 - confidence) / 2.0
    lower = int(binom.ppf(tail, n, q))  # largest l with P(B <= l - 1) <= tail (up to ties of the cdf)
    upper = int(binom.isf(tail, n, q)) + 1  # smallest u with P(B >= u) <= tail
    return Ranks(max(lower, 0), min(upper, n + 1), n)


@functools.lru_cache(maxsize=256)
def min_samples_to_resolve(q: float, confidence: float = DEFAULT_CONFIDENCE, limit: int = 10_000_000) -> int:
    """The smallest n for which the q-quantile's interval has both ends inside the sample."""
    lo, hi = 1, 2
    while hi < limit and not quantile_ranks(hi, q, confidence).resolved:
        lo, hi = hi, hi * 2
    while lo < hi:  # resolution is monotone in n for the quantiles used here
        mid = (lo + hi) // 2
        if quantile_ranks(mid, q, confidence).resolved:
            hi = mid
        else:
            lo = mid + 1
    return lo


def interval_from_sorted(sorted_values: F64, q: float, confidence: float = DEFAULT_CONFIDENCE,
                         n_effective: int | None = None) -> QuantileCI:
    """The q-quantile's interval from an ascending array.

    ``n_effective`` (< len) treats the values as that many independent observations — for inter-token gaps, which
    are correlated within a request: the ranks are computed for ``n_effective`` and scaled onto the array, which
    widens the interval (a design-effect correction; exact when every request contributes equally)."""
    n = len(sorted_values)
    if n == 0:
        return QuantileCI(lo=None, hi=None, resolved=False, n=0, note="no samples")
    n_stat = n if n_effective is None else max(1, min(n, n_effective))
    ranks = quantile_ranks(n_stat, q, confidence)

    def at(rank: int) -> float:
        pos = max(0, min(n - 1, math.ceil(rank * n / n_stat) - 1 if n_stat != n else rank - 1))
        return float(sorted_values[pos])

    return ci_from_ranks(ranks, q, at)


def ci_from_ranks(ranks: Ranks, q: float, value_at: Callable[[int], float], unit: str = "samples") -> QuantileCI:
    """The interval whose ends are the values at ``ranks`` (1-based; ``value_at`` maps a rank to its value), with
    the "unresolved" note when the sample cannot bound a side."""
    lo = value_at(ranks.lower) if ranks.lower >= 1 else None
    hi = value_at(ranks.upper) if ranks.upper <= ranks.n else None
    pct = f"p{_pct(q)}"
    note = None
    if hi is None and lo is not None:
        note = f"unresolved: {ranks.n} {unit} cannot bound {pct} from above; at least {lo:.4g}"
    elif lo is None and hi is not None:
        note = f"unresolved: {ranks.n} {unit} cannot bound {pct} from below; at most {hi:.4g}"
    elif lo is None:
        note = f"unresolved: {ranks.n} {unit}"
    return QuantileCI(lo=lo, hi=hi, resolved=lo is not None and hi is not None, n=ranks.n, note=note)


def quantile_interval(values: npt.ArrayLike, q: float, confidence: float = DEFAULT_CONFIDENCE) -> QuantileCI:
    """The q-quantile's interval of unsorted values (NaN dropped)."""
    arr = np.asarray(values, dtype=np.float64)
    return interval_from_sorted(np.sort(arr[~np.isnan(arr)]), q, confidence)


def _pct(q: float) -> str:
    return f"{q * 100:g}"


def _seed(*arrays: F64) -> int:
    digest = hashlib.blake2b(digest_size=8)
    for arr in arrays:
        digest.update(np.ascontiguousarray(arr, dtype=np.float64).tobytes())
    return int.from_bytes(digest.digest(), "big")


def _boot(stat: Callable[..., F64], a: F64, b: F64, confidence: float, estimate: float, what: str,
          paired: bool = False) -> RatioCI:
    rng = np.random.default_rng(_seed(a, b))
    method = f"{RATIO_METHOD}, paired by request" if paired else RATIO_METHOD
    res = bootstrap((a, b), stat, vectorized=True, paired=paired, confidence_level=confidence,
                    n_resamples=BOOTSTRAP_RESAMPLES, method="percentile", random_state=rng)
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return RatioCI(ratio=estimate, lo=None, hi=None, resolved=False, confidence=confidence,
                       method=method, note=f"{what}: the bootstrap interval is not finite")
    return RatioCI(ratio=estimate, lo=lo, hi=hi, resolved=True, confidence=confidence, method=method)


MIN_PAIRED_SHARE = 0.8


def matched(a: F64, keys_a: npt.ArrayLike | None, b: F64, keys_b: npt.ArrayLike | None
            ) -> tuple[F64, F64] | None:
    """The values of requests planned in both arms (same plan key), in key order; None when too few match.

    The request plan is identical across arms, so request *k* of one arm and of the baseline carry the same prompt:
    pairing them removes the prompt mix from the comparison. Pairs are used only when at least
    ``MIN_PAIRED_SHARE`` of the smaller side matched: a faster arm completes more requests in the same time, and a
    sequential step that ended early holds the plan's first requests, so the pairs are the requests both arms served."""
    if keys_a is None or keys_b is None:
        return None
    ka, kb = np.asarray(keys_a).astype(str), np.asarray(keys_b).astype(str)
    if len(ka) != len(a) or len(kb) != len(b) or len(np.unique(ka)) != len(ka) or len(np.unique(kb)) != len(kb):
        return None
    _common, ia, ib = np.intersect1d(ka, kb, assume_unique=True, return_indices=True)
    if len(ia) < MIN_PAIRED_SHARE * min(len(a), len(b)) or len(ia) == 0:
        return None
    x, y = a[ia], b[ib]
    keep = ~(np.isnan(x) | np.isnan(y))
    return x[keep], y[keep]


def quantile_ratio(a: npt.ArrayLike, b: npt.ArrayLike, q: float, confidence: float = DEFAULT_CONFIDENCE, *,
                   keys_a: npt.ArrayLike | None = None, keys_b: npt.ArrayLike | None = None) -> RatioCI:
    """Interval for ``quantile_q(a) / quantile_q(b)``; paired by request when ``keys_*`` match (see
    :func:`matched`), else two independent samples. NaN dropped."""
    raw_a = np.asarray(a, dtype=np.float64)
    raw_b = np.asarray(b, dtype=np.float64)
    pairs = matched(raw_a, keys_a, raw_b, keys_b)
    if pairs is not None and len(pairs[0]) > 0:
        return _quantile_ratio(pairs[0], pairs[1], q, confidence, paired=True)
    return _quantile_ratio(raw_a[~np.isnan(raw_a)], raw_b[~np.isnan(raw_b)], q, confidence, paired=False)


def _quantile_ratio(x_raw: F64, y_raw: F64, q: float, confidence: float, *, paired: bool) -> RatioCI:
    # Unpaired samples are sorted so the interval (and the bootstrap's data-derived seed) does not depend on the
    # order the records happened to be read in.
    x, y = (x_raw, y_raw) if paired else (np.sort(x_raw), np.sort(y_raw))
    what = f"p{_pct(q)} ratio"
    if len(x) == 0 or len(y) == 0:
        return RatioCI(ratio=None, lo=None, hi=None, resolved=False, confidence=confidence, method=RATIO_METHOD,
                       note=f"{what}: no samples on one side")
    qa, qb = float(np.quantile(x, q)), float(np.quantile(y, q))
    estimate = qa / qb if qb > 0 else None
    need = min_samples_to_resolve(q, confidence)
    # Whether a percentile resolves depends only on the sample size: no need to build the intervals.
    if not (quantile_ranks(len(x), q, confidence).resolved and quantile_ranks(len(y), q, confidence).resolved):
        return RatioCI(ratio=estimate, lo=None, hi=None, resolved=False, confidence=confidence, method=RATIO_METHOD,
                       note=f"{what}: unresolved ({len(x)} and {len(y)} samples; p{_pct(q)} needs {need} on "
                       f"each side at {confidence:.0%})")
    if qb <= 0 or estimate is None:
        return RatioCI(ratio=None, lo=None, hi=None, resolved=False, confidence=confidence, method=RATIO_METHOD,
                       note=f"{what}: the reference quantile is 0")

    def stat(s1: F64, s2: F64, axis: int = -1) -> F64:
        num = np.quantile(s1, q, axis=axis)
        den = np.quantile(s2, q, axis=axis)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(num / den, dtype=np.float64)

    return _boot(stat, x, y, confidence, estimate, what, paired=paired)


def sum_ratio(a: npt.ArrayLike, b: npt.ArrayLike, duration_a_s: float, duration_b_s: float,
              confidence: float = DEFAULT_CONFIDENCE, min_samples: int = 10) -> RatioCI:
    """Interval for ``(sum(a) / duration_a) / (sum(b) / duration_b)`` — a throughput ratio over fixed step
    durations, resampling the requests that produced the tokens."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    x, y = x[~np.isnan(x)], y[~np.isnan(y)]
    if len(x) < min_samples or len(y) < min_samples or duration_a_s <= 0 or duration_b_s <= 0:
        return RatioCI(ratio=None, lo=None, hi=None, resolved=False, confidence=confidence, method=RATIO_METHOD,
                       note=f"throughput ratio: {len(x)} and {len(y)} requests ({min_samples} needed on each side)")
    scale = duration_b_s / duration_a_s
    sb = float(y.sum())
    if sb <= 0:
        return RatioCI(ratio=None, lo=None, hi=None, resolved=False, confidence=confidence, method=RATIO_METHOD,
                       note="throughput ratio: the reference produced no tokens")
    estimate = float(x.sum()) / sb * scale

    def stat(s1: F64, s2: F64, axis: int = -1) -> F64:
        # Sums of a resample of the same size: the sample's mean times its size (its count is fixed by the step).
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(s1.mean(axis=axis) * len(x) / (s2.mean(axis=axis) * len(y)) * scale,
                              dtype=np.float64)

    return _boot(stat, x, y, confidence, estimate, "throughput ratio")


def invert(ci: RatioCI) -> RatioCI:
    """``b / a`` from an interval for ``a / b`` (for lower-is-better measures read as improvements)."""
    def inv(v: float | None) -> float | None:
        return None if v is None or v <= 0 else 1.0 / v

    return ci.model_copy(update={"ratio": inv(ci.ratio), "lo": inv(ci.hi), "hi": inv(ci.lo)})
