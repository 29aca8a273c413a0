"""One rule result and the role it played in an arm's decision -> a :class:`~harness.schema.findings.Finding`
(a code, the rule, its step, interval and bound), so what decided an arm is data, not only a sentence."""

from __future__ import annotations

from harness.schema.findings import Finding, FindingRole, finding_code
from harness.schema.summary import ArmFailure, RuleResult


def finding(r: RuleResult, index: int, role: FindingRole) -> Finding:
    """A rule result as a finding: its interval and the bound the interval was held against (the breach bound
    for a breach, the pass bound otherwise, the threshold where the rule has no bounds)."""
    bound = r.breach_bound if r.status == "breach" else r.pass_bound
    return Finding(code=finding_code(r, role), role=role, rule=r.rule, kind=r.kind, status=r.status,
                   critical=r.critical, step=r.step, rule_index=index, interval=r.interval,
                   bound=bound if bound is not None else r.threshold, floor=r.floor, reason_code=r.reason_code)


def failure_finding(failure: ArmFailure) -> Finding:
    """An arm that could not be judged (``harness-failed`` when the harness, not the server, failed)."""
    return Finding(code="harness-failed" if failure.phase == "harness" else "arm-failed", role="failure",
                   phase=failure.phase)


def not_run_finding() -> Finding:
    return Finding(code="not-run", role="not-run")


def baseline_finding() -> Finding:
    return Finding(code="baseline", role="baseline")
