"""The arithmetic of power before the run, with the rules' own error rates.

**Resolution (distribution-free).** A percentile is resolved by ``n`` requests when its order-statistic interval
(:func:`harness.stats.intervals.quantile_ranks`, exact binomial) has both ends inside the sample; the ranks
``l..u`` say, with no assumption about latency, that the true percentile lies between the ``100 l/n``-th and the
``100 u/n``-th sample percentile. A one-sided test at ``alpha_each`` reads the two-sided ``1 - 2 alpha_each``
interval, as :mod:`harness.decision.evidence` does.

**Smallest detectable effect (lognormal, stated).** With latency lognormal of spread ``sigma`` (log-scale standard
deviation), the interval's ends sit at ``sigma * Phi^-1(rank / (n + 1))`` in log space, so its half-width there is
``h = sigma * (Phi^-1(u/(n+1)) - Phi^-1(l/(n+1))) / 2``; the ratio of two independent samples of ``n`` has a log
standard error ``se = sqrt(2) h / z`` with ``z = Phi^-1(1 - alpha_each)``. A breach (lower bound above ``limit``) is
then flagged with probability ``power`` when the true ratio is at least ``limit * exp((z + z_power) se)``, and an
unchanged arm passes (upper bound within ``limit``) with that probability only if ``limit >= exp((z + z_power)
se)``. Pairing by request usually narrows the ratio's interval, so these figures err on the cautious side.
"""

from __future__ import annotations

import math
from statistics import NormalDist

from harness.stats.intervals import min_samples_to_resolve, quantile_ranks

_N = NormalDist()
CANDIDATE_PERCENTILES = (99.0, 98.0, 97.5, 97.0, 95.0, 90.0, 80.0, 75.0, 50.0)
DEFAULT_SIGMA = 0.5
DEFAULT_SIGMA_SOURCE = ("default 0.5 (not measured; a loaded server's TTFT spread is often 0.3-0.8): measure it "
                        "with --from-run or --calibrate, or give --sigma")


def needed(q: float, confidence: float, min_samples: int = 0) -> int:
    """Requests that just resolve the q-quantile at ``confidence`` (and meet a rule's ``min_samples``)."""
    return max(min_samples, min_samples_to_resolve(q, confidence))


def ranks_of(n: int, q: float, confidence: float) -> tuple[int, int] | None:
    """The interval's ranks when ``n`` resolves the quantile, else None."""
    r = quantile_ranks(n, q, confidence)
    return (r.lower, r.upper) if r.resolved else None


def sample_percentiles(n: int, ranks: tuple[int, int] | None) -> tuple[float, float] | None:
    """Ranks as sample percentiles (``100 * rank / n``)."""
    if ranks is None or n <= 0:
        return None
    return (round(100.0 * ranks[0] / n, 1), round(100.0 * ranks[1] / n, 1))


def _log_se(n: int, q: float, alpha_each: float, sigma: float) -> float | None:
    """Log-scale standard error of a ratio of two independent q-quantiles from ``n`` each (lognormal)."""
    ranks = ranks_of(n, q, 1.0 - 2.0 * alpha_each)
    if ranks is None:
        return None
    half = sigma * (_N.inv_cdf(ranks[1] / (n + 1)) - _N.inv_cdf(ranks[0] / (n + 1))) / 2.0
    return math.sqrt(2.0) * half / _N.inv_cdf(1.0 - alpha_each)


def detectable_ratio(n: int, q: float, alpha_each: float, sigma: float, limit: float, power: float) -> float | None:
    """The smallest true ratio whose interval clears ``limit`` with probability ``power`` (lognormal)."""
    se = _log_se(n, q, alpha_each, sigma)
    if se is None:
        return None
    return limit * math.exp((_N.inv_cdf(1.0 - alpha_each) + _N.inv_cdf(power)) * se)


def pass_limit(n: int, q: float, alpha_each: float, sigma: float, power: float) -> float | None:
    """The smallest limit an unchanged arm (true ratio 1) stays within with probability ``power`` (lognormal)."""
    se = _log_se(n, q, alpha_each, sigma)
    if se is None:
        return None
    return math.exp((_N.inv_cdf(1.0 - alpha_each) + _N.inv_cdf(power)) * se)


def highest_resolvable(n: int, confidence: float, below: float = 100.0) -> float | None:
    """The highest of the usual percentiles (under ``below``) that ``n`` requests resolve at ``confidence``."""
    for pct in CANDIDATE_PERCENTILES:
        if pct < below and quantile_ranks(n, pct / 100.0, confidence).resolved:
            return pct
    return None


def duration_for(requests: int, rps: float) -> float:
    """Seconds that collect ``requests`` at ``rps``, rounded up to 5 s."""
    return float(max(5, math.ceil(requests / rps / 5.0) * 5))


def sigma_from_quantiles(p50: float | None, p95: float | None) -> float | None:
    """Lognormal sigma from a median and a p95: ``ln(p95 / p50) / Phi^-1(0.95)``."""
    if p50 is None or p95 is None or p50 <= 0 or p95 <= p50:
        return None
    return math.log(p95 / p50) / _N.inv_cdf(0.95)
