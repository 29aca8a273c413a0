"""What ``harness plan`` says about a capacity search (``steps.search``): the SLO, the range, how probes are decided
and the most time it can take per arm."""

from __future__ import annotations

from harness.config.scenario import Scenario
from harness.config.search import fmt_load, slo_text
from harness.stats.intervals import min_samples_to_resolve


def search_plan_lines(scenario: Scenario) -> list[str]:
    """Lines describing the search, or none without ``steps.search``."""
    spec = scenario.steps.search
    if spec is None:
        return []
    kind = scenario.steps.search_kind
    confidence = scenario.rules.confidence
    need = min_samples_to_resolve(spec.percentile / 100.0, confidence)
    res = spec.resolution if isinstance(spec.resolution, str) else fmt_load(kind, spec.resolution)
    ends = f"{spec.probe_duration_s:g} s" + (f" or {spec.probe_requests} requests" if spec.probe_requests else "")
    return [
        f"capacity at SLO per arm, after its fixed steps: the highest load with {slo_text(spec)}, "
        f"{fmt_load(kind, spec.low)} to {fmt_load(kind, spec.high)} (x{spec.growth:g} up, then bisect to {res})",
        f"probes of {ends}; at most {spec.max_probes} per arm, about {spec.worst_case_s() / 60:.1f} min per arm at "
        "most" + (f" (no probe starts after {spec.max_search_s:g} s)" if spec.max_search_s else ""),
        f"a probe meets when its p{spec.percentile} interval ({confidence:.0%}) is within the budget, breaks when it "
        f"is above; unresolved, it runs again {spec.extend_factor:g}x as long once, then counts as not meeting "
        f"(p{spec.percentile} needs {need} requests to be bounded from above)",
        "the capacity informs; it does not change the verdict",
    ]
