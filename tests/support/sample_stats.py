"""The statistics of the sample summary: intervals, rules with evidence, the noise floor, load time.

Intervals are the order-statistic ranks of :func:`harness.stats.intervals.quantile_ranks` placed on a
log-normal latency distribution fitted to each figure's p50 and p99, so which percentiles resolve (a p99 needs 368
samples at 95%) follows the real rule; nothing here reads the clock or draws random numbers.
"""

from __future__ import annotations

import math
from statistics import NormalDist

from harness.schema.intervals import Percentiles, QuantileCI, RatioCI
from harness.schema.summary import LoadTime, NoiseFloor, NoiseFloorItem, RuleResult, Statistics
from harness.stats.intervals import QUANTILE_METHOD, RATIO_METHOD_NOTE, ci_from_ranks, quantile_ranks

CONFIDENCE = 0.95
_Z = NormalDist()
_SIGMA_DEFAULT = 0.45


def _sigma(p50: float | None, p99: float | None) -> float:
    if p50 is None or p99 is None or p50 <= 0 or p99 <= p50:
        return _SIGMA_DEFAULT
    return math.log(p99 / p50) / _Z.inv_cdf(0.99)


def quantile_ci(value: float | None, q: float, n: int, sigma: float = _SIGMA_DEFAULT) -> QuantileCI | None:
    """The interval a sample of ``n`` would give the q-quantile ``value`` (None when there is no value)."""
    if value is None:
        return None
    if n <= 0:
        return QuantileCI(n=0, note="no samples")
    ranks = quantile_ranks(n, q, CONFIDENCE)

    def at(rank: int) -> float:
        shift = _Z.inv_cdf(min(max(rank / (n + 1), 1e-9), 1 - 1e-9)) - _Z.inv_cdf(q)
        return round(value * math.exp(sigma * shift), 2)

    return ci_from_ranks(ranks, q, at)


def with_intervals(p: Percentiles, n: int | None = None) -> Percentiles:
    """``p`` with p50/p95/p99 intervals for ``n`` samples (default: its count)."""
    size = p.count if n is None else n
    sigma = _sigma(p.p50, p.p99)
    return p.model_copy(update={
        "p50_ci": quantile_ci(p.p50, 0.5, size, sigma), "p95_ci": quantile_ci(p.p95, 0.95, size, sigma),
        "p99_ci": quantile_ci(p.p99, 0.99, size, sigma), "confidence": CONFIDENCE, "method": QUANTILE_METHOD})


def window_ci(p99: float, n: int) -> QuantileCI | None:
    """The interval of a window's p99 from ``n`` requests."""
    return quantile_ci(p99, 0.99, n, _SIGMA_DEFAULT)


def budget_outcome(ci: QuantileCI | None, budget: float) -> str:
    """``breach`` (the interval is above the budget), ``pass`` (below it) or ``unresolved``."""
    if ci is None:
        return "unresolved"
    if ci.lo is not None and ci.lo > budget:
        return "breach"
    if ci.hi is not None and ci.hi <= budget:
        return "pass"
    return "unresolved"


def ratio_ci(ratio: float, rel: float, *, resolved: bool = True, note: str | None = None,
             paired: bool = False) -> RatioCI:
    """A ratio with a symmetric-on-log interval of relative half-width ``rel`` (a closed-loop comparison:
    unpaired, as the rules make it)."""
    method = ("circular block bootstrap, paired by request" if paired
              else "circular block bootstrap, arms resampled independently")
    if not resolved:
        return RatioCI(ratio=ratio, resolved=False, confidence=CONFIDENCE, method=method, note=note, paired=paired)
    return RatioCI(ratio=ratio, lo=round(ratio / (1 + rel), 3), hi=round(ratio * (1 + rel), 3), resolved=True,
                   confidence=CONFIDENCE, method=method, note=note, paired=paired)


def statistics() -> Statistics:
    """How the sample's figures were computed."""
    return Statistics(confidence=CONFIDENCE, alpha=0.05, quantile_method=QUANTILE_METHOD,
                      ratio_method=RATIO_METHOD_NOTE,
                      multiplicity="Holm over steps x measures", sequential="quantile confidence sequences "
                      "(Howard & Ramdas), checked every 5 s")


def noise_floor() -> NoiseFloor:
    """The baseline re-run at the end of the sample run (A/A)."""
    drift = {(0, "ttft_p95"): (1.02, 0.06), (1, "ttft_p95"): (0.97, 0.05), (2, "ttft_p95"): (1.06, 0.05),
             (0, "output_tokens_per_s"): (1.0, 0.02), (1, "output_tokens_per_s"): (0.99, 0.02),
             (2, "output_tokens_per_s"): (0.98, 0.02)}
    items = [NoiseFloorItem(step=step, measure=measure, interval=ratio_ci(r, rel))
             for (step, measure), (r, rel) in drift.items()]
    return NoiseFloor(arm="gpu-only (A/A re-run)", items=items, factor=1.06,
                      message="The baseline re-run drifted at most 6% (p95 TTFT at c32 1.06x); thresholds are "
                              "widened by 1.06x and an effect inside the noise floor does not decide.")


def load_time(planned: list[float], used: list[float]) -> LoadTime:
    """Load seconds of the measured steps."""
    return LoadTime(planned_s=sum(planned), used_s=round(sum(used), 1), steps=len(used),
                    steps_ended_early=sum(1 for p, u in zip(planned, used, strict=True) if u < p))


def rules(arm: str) -> list[RuleResult]:
    """The sample's rule results: evidence intervals, thresholds, one shared breach, unresolved ones."""
    if arm == "gpu-only":
        return [RuleResult(rule="ttft-p99-budget", kind="budget", status="breach", step=2, threshold=2000.0,
                           message="p99 TTFT above the 2000 ms budget in 5 of the last 6 windows at c32 (interval "
                                   "lower ends above the budget)")]
    if arm == "cpu":
        return [
            RuleResult(rule="ttft-p99-budget", kind="budget", status="pass", critical=True, threshold=2000.0,
                       message="p99 TTFT stayed under 2000 ms (worst window 1890 ms at c32)"),
            RuleResult(rule="itl-p99-budget", kind="budget", status="pass", threshold=100.0,
                       message="p99 ITL at most 79 ms"),
            RuleResult(rule="ttft-p99-vs-baseline", kind="regression", status="unresolved", step=0,
                       interval=ratio_ci(0.93, 0.0, resolved=False,
                                         note="p99 ratio: unresolved (216 and 216 samples; p99 needs 368 on each side "
                                              "at 95%)"), threshold=1.10,
                       message="p99 TTFT at c4 cannot be compared: 216 requests per arm, p99 needs 368"),
            RuleResult(rule="ttft-p99-vs-baseline", kind="regression", status="pass", step=2,
                       interval=ratio_ci(0.65, 0.11), threshold=1.10,
                       message="p99 TTFT 0.65x baseline at c32, interval below the 1.10x regression limit"),
            RuleResult(rule="earns-keep", kind="earns_keep", status="pass", step=2,
                       interval=ratio_ci(1.41, 0.08), threshold=1.113,
                       message="p95 TTFT improved 1.41x at c32; the interval clears 1.05x widened by the noise "
                               "floor (1.113x), Holm-adjusted over 6 comparisons"),
            RuleResult(rule="cpu-tier-served", kind="causal", status="pass",
                       message="the CPU tier served 27% of prompt tokens at c32"),
        ]
    return [
        RuleResult(rule="ttft-p99-budget", kind="budget", status="breach", critical=True, step=2, threshold=2000.0,
                   shared_with_baseline=True,
                   message="p99 TTFT over 2000 ms in 3 of the last 5 windows at c32; the baseline breaks it too"),
        RuleResult(rule="itl-p99-budget", kind="budget", status="breach", dry_run=True, step=2, threshold=100.0,
                   message="p99 ITL 104 ms > budget 100 ms in 4 of the last 5 windows (dry run)"),
        RuleResult(rule="ttft-p99-vs-baseline", kind="regression", status="pass", step=2,
                   interval=ratio_ci(0.93, 0.09), threshold=1.10,
                   message="p99 TTFT 0.93x baseline at c32, interval below the 1.10x regression limit"),
        RuleResult(rule="earns-keep", kind="earns_keep", status="unresolved", step=2,
                   interval=ratio_ci(1.04, 0.07, paired=False), threshold=1.113,
                   message="p95 TTFT 1.04x better than the cpu arm at c32; the interval straddles 1.113x"),
        RuleResult(rule="noise-floor", kind="noise_floor", status="unresolved", step=2,
                   interval=ratio_ci(1.04, 0.07, paired=False), threshold=1.06,
                   message="the effect (1.04x) is inside the noise floor (1.06x): it does not decide"),
        RuleResult(rule="drill:storage_pressure", kind="drill", status="breach", step=None,
                   message="p99 TTFT 5400 ms during storage pressure > limit 4000 ms"),
    ]
