"""The English the headline is made of: measures, tiers, ratios, what stopped a ``go`` and what to do next, from
findings and effect rows (data in, words out; no method names)."""

from __future__ import annotations

import math

from harness.schema.findings import Finding, FindingCode
from harness.schema.intervals import RatioCI
from harness.schema.summary import ArmSummary, EffectRow

MARGINAL_FACTOR = 10.0  # an open comparison that needs more than this many times the requests: a marginal effect
VERDICT_WORDS = {"go": "GO", "hold": "HOLD", "no-go": "NO-GO", "slo-unmet": "SLO UNMET", "failed": "RUN FAILED"}

_MEASURES = {"output_tokens_per_s": "output throughput", "goodput": "goodput"}


def measure_words(measure: str) -> str:
    """``ttft_p95`` / ``p95 TTFT`` -> ``p95 TTFT``; ``output_tokens_per_s`` -> ``output throughput``."""
    if measure in _MEASURES:
        return _MEASURES[measure]
    metric, _, pct = measure.partition("_p")
    if pct and pct.replace(".", "").isdigit():
        return f"p{pct} {metric.upper()}"
    return measure


def is_latency(measure: str) -> bool:
    """A measure where lower is better (a latency percentile)."""
    return measure not in _MEASURES


def tier_words(arm: ArmSummary) -> str:
    """``16 GiB CPU tier``, ``disk tier``, ``GPU-only``."""
    if arm.tier == "tiered":
        return "disk tier"
    if arm.tier == "cpu":
        gib = arm.cpu_tier_bytes / (1 << 30)
        return f"{gib:.0f} GiB CPU tier" if gib >= 1 else "CPU tier"
    return "GPU-only"


def _num(value: float) -> str:
    return f"{value:.2f}"


def span(ci: RatioCI, *, invert: bool = False) -> str | None:
    """``1.41x (1.27–1.54)``; ``invert`` turns a better-is-higher latency ratio into the arm's latency over the
    other's (``0.79x (0.67–1.00)``). None when there is no point estimate."""
    if ci.ratio is None or not math.isfinite(ci.ratio) or ci.ratio <= 0:
        return None
    point, lo, hi = ci.ratio, ci.lo, ci.hi
    if invert:
        point, lo, hi = 1 / point, (1 / hi if hi else None), (1 / lo if lo else None)
    if ci.resolved and lo is not None and hi is not None and math.isfinite(lo) and math.isfinite(hi):
        return f"{_num(point)}x ({_num(lo)}–{_num(hi)})"
    return f"{_num(point)}x (interval unresolved)"


def gain_words(row: EffectRow) -> str:
    """``raised output throughput 1.41x (1.27–1.54)`` / ``cut p95 TTFT to 0.79x (0.67–1.00)``."""
    latency = is_latency(row.measure)
    figure = span(row.interval, invert=latency) or "?"
    verb = f"cut {measure_words(row.measure)} to" if latency else f"raised {measure_words(row.measure)}"
    return f"{verb} {figure}"


def versus_words(row: EffectRow, baseline: str) -> str:
    return "the baseline" if row.versus == baseline else row.versus


def steps_words(labels: list[str]) -> str:
    """``c8–c32`` for several, ``c8`` for one."""
    if not labels:
        return ""
    return labels[0] if len(labels) == 1 else f"{labels[0]}–{labels[-1]}"


def stop_words(f: Finding, arm: ArmSummary, row: EffectRow | None, baseline: str) -> str:
    """What the finding says stopped the arm, in a short clause: ``no gain over cpu-16g is shown (p95 TTFT
    1.06x, 0.93–1.33 at c32; needs 1.05x)``."""
    at = f" at {row.label}" if row is not None and row.label else ""
    code = f.code
    if code == "host-contended":
        return "the host was too busy to judge it at any step"
    if code == "floor-above-tolerance" and row is not None:
        latency = is_latency(row.measure) and row.test == "improvement"
        figure = span(row.interval, invert=latency) or "?"
        bound = row.pass_limit if row.test == "harm" else row.limit
        return (f"the baseline itself moved {_pct(f.floor)} when re-run, so {measure_words(row.measure)}{at} must "
                f"show {'≤' if row.test == 'harm' else '≥'} {_num(bound or 1.0)}x to count; it shows {figure}")
    if code in ("gain-unresolved", "gain-not-shown"):
        other = arm_versus(arm, baseline)
        if row is None:
            return f"no gain over {other} is shown"
        figure = span(row.interval, invert=is_latency(row.measure)) or "?"
        need = f", needs ≤ {_num(1 / row.limit)}x" if row.limit and is_latency(row.measure) else (
            f", needs ≥ {_num(row.limit)}x" if row.limit else "")
        return f"no gain over {other} is shown; at best {measure_words(row.measure)} {figure}{at}{need}"
    if code in ("harm-shown", "harm-unresolved") and row is not None:
        figure = span(row.interval) or "?"
        limit = f", limit {_num(row.limit)}x" if row.limit else ""
        told = "is worse" if code == "harm-shown" else "may be worse"
        return f"{measure_words(row.measure)}{at} {told} than the baseline's: {figure}{limit}"
    return _STOPS.get(code, f"{f.rule or code} did not pass")


_STOPS: dict[FindingCode, str] = {
    "errors-raised": "it raised the error rate",
    "errors-unresolved": "too few requests to tell whether it raises the error rate",
    "budget-breached": "it breaks a latency budget the arm without it keeps",
    "budget-shared": "every arm breaks the same budget, the baseline included",
    "budget-unresolved": "the steps could not bound a budget's percentile",
    "tier-unhealthy": "its offload tier reported failures",
    "no-own-tier-hits": "its tier served no cache hits",
    "fit-warning": "the workload leaves the tier nothing to do (fit screen)",
    "arm-failed": "it could not be judged: the server failed",
    "harness-failed": "the harness itself failed, not the server",
    "not-run": "it was not run",
    "harm-shown": "it made latency worse than the baseline's",
    "harm-unresolved": "it may make latency worse than the baseline's",
    "floor-above-tolerance": "the baseline's own run-to-run noise is wider than the rule's tolerance",
    "value-negative": "its newest tier costs more than it saves against the arm without it (informs, not deciding)",
}


def _pct(floor: float | None) -> str:
    return f"{(floor - 1) * 100:.0f}%" if floor is not None and floor > 1 else "by its noise"


def arm_versus(arm: ArmSummary, baseline: str) -> str:
    """The arm a tier arm's gain is judged against (the arm without its newest tier)."""
    rows = [r for r in arm.effects if r.test == "improvement"]
    return versus_words(rows[0], baseline) if rows else "the arm without it"


def next_words(f: Finding, row: EffectRow | None, keep: str) -> str:
    """What to do next about the finding that stopped a ``go``."""
    plan = row.settle_plan if row is not None else None
    code = f.code
    if code == "host-contended":
        return "rerun on a quieter host"
    if code in ("gain-unresolved", "harm-unresolved", "budget-unresolved", "errors-unresolved") and plan is not None:
        if plan.by_load and plan.seconds is not None and row is not None:
            if plan.factor is not None and plan.factor > MARGINAL_FACTOR:
                return f"~{plan.factor:.0f}x the requests would settle it; the gain, if any, is marginal"
            return f"{row.label} steps of ~{plan.seconds:.0f} s would settle it"
        if not plan.by_load and code == "gain-unresolved":
            return f"more load would not settle it; accept that the tier does not pay here and keep {keep}"
    if code == "floor-above-tolerance":
        return "a quieter host or a longer A/A re-run"
    if code in ("gain-unresolved", "budget-unresolved", "errors-unresolved", "harm-unresolved"):
        return "longer steps (harness plan shows how long)"
    return _NEXT.get(code, f"keep {keep}; the details below name the rule")


_NEXT: dict[FindingCode, str] = {
    "gain-not-shown": "accept that the tier does not pay at this load, or test heavier traffic",
    "no-own-tier-hits": "check that the tier is enabled and that the workload's prefixes come back",
    "fit-warning": "see the fit screen: the tier has nothing to hold at this load",
    "budget-shared": "revisit the SLO or the load",
    "arm-failed": "fix the arm (its log is in the report), then harness run --resume RUN_DIR",
    "harness-failed": "harness run --resume RUN_DIR",
    "tier-unhealthy": "read the tier-health details below",
}
