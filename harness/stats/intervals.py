"""Confidence intervals for percentiles (distribution-free) and for ratios between arms (block bootstrap).

**Percentiles** — order-statistic intervals with exact binomial coverage (Hahn & Meeker, *Statistical Intervals*,
ch. 5): with ``B ~ Binomial(n, q)`` the number of samples at or below the true q-quantile, the interval
``[x(l), x(u)]`` (1-based ranks) covers it with probability ``P(l <= B < u) >= confidence``. The ranks come from
``scipy.stats.binom``; nothing is assumed about the latency distribution. When the sample cannot bound the
quantile from above (``u > n``: a p99 from 40 requests) the percentile is **unresolved** and reported as "at least
``x(l)``"; from below likewise ("at most"). An unresolved percentile is never compared as if it were exact.

**Ratios** — a percentile bootstrap of the ratio of two quantiles, or of two sums over fixed durations
(throughput), drawn by :mod:`harness.stats.resample` (``arch.bootstrap``): by default a **circular block
bootstrap** over each series in its send order, since consecutive requests of a load step are correlated (the
choice and its measured coverage: ``tools/bench/coverage.py``, ``docs/statistics.md``). Two arms are independent
samples: each is resampled by its own bootstrap, seeded from its own values, and replicate ``r`` of the ratio is
replicate ``r`` of one over replicate ``r`` of the other. **Paired** samples (the same planned requests in both
arms, aligned by the caller) are one bootstrap over both series, the same indices for both. Every interval carries
the sample sizes it compared (``n``, ``n_versus``). A ratio is only computed when both quantiles are resolved at the
ratio's confidence: a bootstrap of an order statistic the sample cannot resolve (the maximum) is meaningless.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.stats import binom

from harness.schema.intervals import QuantileCI, RatioCI
from harness.stats.resample import METHOD_TEXT, Draw, Method, draw

F64 = npt.NDArray[np.float64]
DEFAULT_CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2000
DEFAULT_METHOD: Method = "circular"
QUANTILE_METHOD = "order-statistic (exact binomial, distribution-free)"
RATIO_METHOD = "percentile bootstrap"
RATIO_METHOD_NOTE = (f"{RATIO_METHOD} of the ratio ({METHOD_TEXT[DEFAULT_METHOD]} over each arm's send-ordered "
                     "steady-state series, block length by Politis & White, arms resampled independently; paired by "
                     f"plan key only where both arms served the same planned requests), {BOOTSTRAP_RESAMPLES} "
                     "replicates, seeded by the data")


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


def _method_text(draws: tuple[Draw, ...], paired: bool) -> str:
    method = METHOD_TEXT[draws[0].method]
    if draws[0].method != "iid":
        blocks = " / ".join(f"{d.block:.3g}" for d in draws)
        method += f" (block {blocks})"
    return f"{method}, {'paired by request' if paired else 'arms resampled independently'}"


def _interval(num: F64, den: F64, confidence: float, estimate: float, what: str, draws: tuple[Draw, ...],
              paired: bool, n: int, n_versus: int) -> RatioCI:
    """The percentile interval of the ratio replicates ``num / den``."""
    method = _method_text(draws, paired)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = num / den
    tail = (1.0 - confidence) / 2.0
    if not np.isfinite(ratios).all():
        return RatioCI(ratio=estimate, lo=None, hi=None, resolved=False, confidence=confidence, method=method,
                       note=f"{what}: the bootstrap interval is not finite", n=n, n_versus=n_versus, paired=paired)
    lo, hi = (float(v) for v in np.quantile(ratios, [tail, 1.0 - tail]))
    return RatioCI(ratio=estimate, lo=lo, hi=hi, resolved=True, confidence=confidence, method=method, n=n,
                   n_versus=n_versus, paired=paired)


def _draws(x: F64, y: F64, paired: bool, method: Method, replicates: int) -> tuple[Draw, Draw]:
    """One bootstrap over both series (paired) or one per arm, each seeded from its own values and side."""
    if paired:
        both = draw(x, y, method=method, replicates=replicates, tag="paired")
        return both, both
    return (draw(x, method=method, replicates=replicates, tag="arm"),
            draw(y, method=method, replicates=replicates, tag="reference"))


def quantile_ratio(a: npt.ArrayLike, b: npt.ArrayLike, q: float, confidence: float = DEFAULT_CONFIDENCE, *,
                   paired: bool = False, method: Method = DEFAULT_METHOD,
                   replicates: int = BOOTSTRAP_RESAMPLES) -> RatioCI:
    """Interval for ``quantile_q(a) / quantile_q(b)``; ``a`` and ``b`` in send order (the block bootstrap resamples
    runs of neighbours). ``paired``: ``a[i]`` and ``b[i]`` are the same planned request (equal lengths; the caller
    pairs only where both arms served the same planned requests, :func:`harness.analysis.steady.pair_positions`; a
    NaN on either side drops the pair); else two independent samples (NaN dropped)."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if paired:
        if len(x) != len(y):
            raise ValueError(f"paired samples must have the same length ({len(x)} and {len(y)})")
        keep = ~(np.isnan(x) | np.isnan(y))
        x, y = x[keep], y[keep]
    else:
        x, y = x[~np.isnan(x)], y[~np.isnan(y)]
    what = f"p{_pct(q)} ratio"
    base = {"confidence": confidence, "n": len(x), "n_versus": len(y), "paired": paired}
    if len(x) == 0 or len(y) == 0:
        return RatioCI(ratio=None, lo=None, hi=None, resolved=False, method=RATIO_METHOD,
                       note=f"{what}: no samples on one side", **base)
    qa, qb = float(np.quantile(x, q)), float(np.quantile(y, q))
    estimate = qa / qb if qb > 0 else None
    need = min_samples_to_resolve(q, confidence)
    # Whether a percentile resolves depends only on the sample size: no need to build the intervals.
    if not (quantile_ranks(len(x), q, confidence).resolved and quantile_ranks(len(y), q, confidence).resolved):
        return RatioCI(ratio=estimate, lo=None, hi=None, resolved=False, method=RATIO_METHOD,
                       note=f"{what}: unresolved ({len(x)} and {len(y)} samples; p{_pct(q)} needs {need} on "
                       f"each side at {confidence:.0%})", **base)
    if qb <= 0 or estimate is None:
        return RatioCI(ratio=None, lo=None, hi=None, resolved=False, method=RATIO_METHOD,
                       note=f"{what}: the reference quantile is 0", **base)
    dx, dy = _draws(x, y, paired, method, replicates)
    return _interval(dx.quantile(x, q), dy.quantile(y, q), confidence, estimate, what, (dx, dy) if not paired
                     else (dx,), paired, len(x), len(y))


def sum_ratio(a: npt.ArrayLike, b: npt.ArrayLike, duration_a_s: float, duration_b_s: float,
              confidence: float = DEFAULT_CONFIDENCE, min_samples: int = 10, *, method: Method = DEFAULT_METHOD,
              replicates: int = BOOTSTRAP_RESAMPLES, n: int | None = None, n_versus: int | None = None,
              unit: str = "requests") -> RatioCI:
    """Interval for ``(sum(a) / duration_a) / (sum(b) / duration_b)`` over fixed durations: a throughput ratio
    (``a``, ``b``: output tokens per time bin of each steady-state window, see :func:`binned`) or a share ratio
    (within-SLO flags per request over the request counts). Each series is resampled in its order; ``n`` and
    ``n_versus`` are the requests behind each side (default: the series' lengths), ``min_samples`` applies to them."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    x, y = x[~np.isnan(x)], y[~np.isnan(y)]
    n_a, n_b = (len(x) if n is None else n), (len(y) if n_versus is None else n_versus)
    base = {"confidence": confidence, "n": n_a, "n_versus": n_b, "paired": False}
    if n_a < min_samples or n_b < min_samples or len(x) == 0 or len(y) == 0 or duration_a_s <= 0 \
            or duration_b_s <= 0:
        return RatioCI(ratio=None, lo=None, hi=None, resolved=False, method=RATIO_METHOD,
                       note=f"throughput ratio: {n_a} and {n_b} {unit} ({min_samples} needed on each side)", **base)
    scale = duration_b_s / duration_a_s
    sb = float(y.sum())
    if sb <= 0:
        return RatioCI(ratio=None, lo=None, hi=None, resolved=False, method=RATIO_METHOD,
                       note="throughput ratio: the reference produced no tokens", **base)
    estimate = float(x.sum()) / sb * scale
    dx, dy = _draws(x, y, False, method, replicates)
    return _interval(dx.total(x) * scale, dy.total(y), confidence, estimate, "throughput ratio", (dx, dy), False,
                     n_a, n_b)


def binned(times_ns: npt.ArrayLike, weights: npt.ArrayLike, start_ns: int, end_ns: int, bins: int) -> F64:
    """The sum of ``weights`` per equal time bin of ``[start_ns, end_ns]`` (events outside are left out): a rate's
    time series, for :func:`sum_ratio` over the window's duration."""
    t = np.asarray(times_ns, dtype=np.int64)
    w = np.asarray(weights, dtype=np.float64)
    span = end_ns - start_ns
    if bins <= 0 or span <= 0:
        return np.zeros(0)
    inside = (t >= start_ns) & (t <= end_ns)
    k = np.minimum(((t[inside] - start_ns) * bins) // span, bins - 1)
    return np.asarray(np.bincount(k, weights=w[inside], minlength=bins), dtype=np.float64)


def invert(ci: RatioCI) -> RatioCI:
    """``b / a`` from an interval for ``a / b`` (for lower-is-better measures read as improvements); the sides'
    sample sizes stay as they were (``n`` is still the arm's)."""
    def inv(v: float | None) -> float | None:
        return None if v is None or v <= 0 else 1.0 / v

    return ci.model_copy(update={"ratio": inv(ci.ratio), "lo": inv(ci.hi), "hi": inv(ci.lo)})
