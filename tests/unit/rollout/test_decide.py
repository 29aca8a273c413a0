"""Decisions per arm and the verdict chain."""

from __future__ import annotations

from harness.rollout.decide import decide_arm, verdict
from harness.summary import ArmFailure, ArmSummary, RuleResult


def rr(status: str, kind: str = "budget", critical: bool = False, dry_run: bool = False, rule: str = "r") -> RuleResult:
    return RuleResult(rule=rule, kind=kind, status=status, critical=critical, dry_run=dry_run,  # type: ignore[arg-type]
                      message=f"{rule} {status}")


def decide(rules: list[RuleResult], *, prev: set[str] | None = None, baseline: bool = False,
           failure: ArmFailure | None = None) -> str:
    decision, reasons = decide_arm(is_baseline=baseline, failure=failure, ran=True, rules=rules,
                                   prev_budget_breaches=prev or set(), prev_name="baseline")
    assert reasons
    return decision


def test_arm_decisions() -> None:
    assert decide([rr("pass"), rr("pass", "earns_keep")]) == "go"
    assert decide([rr("breach", critical=True)]) == "no-go"
    assert decide([rr("breach", "regression")]) == "no-go"
    assert decide([rr("breach", "earns_keep")]) == "hold"
    assert decide([rr("inconclusive", "regression")]) == "hold"
    assert decide([rr("breach", dry_run=True)]) == "go"
    assert decide([rr("breach")], prev={"r"}) == "go"  # baseline breaks it too: not the tier's fault (a note)
    assert decide([rr("breach", critical=True)], prev={"r"}) == "no-go"
    assert decide([rr("breach")], baseline=True) == "baseline"
    assert decide([], failure=ArmFailure(phase="start", message="boom")) == "failed"


def arm(name: str, decision: str) -> ArmSummary:
    return ArmSummary(name=name, tier="cpu" if name != "base" else "gpu-only", decision=decision,  # type: ignore[arg-type]
                      reasons=[f"{name} {decision}"])


def test_verdict_chain() -> None:
    v = verdict([arm("base", "baseline"), arm("cpu", "go"), arm("tiered", "no-go")])
    assert (v.verdict, v.recommended_arm, v.exit_code) == ("go", "cpu", 0)
    v = verdict([arm("base", "baseline"), arm("cpu", "no-go"), arm("tiered", "go")])
    assert (v.verdict, v.recommended_arm, v.exit_code) == ("no-go", "base", 1)
    v = verdict([arm("base", "baseline"), arm("cpu", "hold"), arm("tiered", "go")])
    assert (v.verdict, v.recommended_arm, v.exit_code) == ("hold", "base", 3)
    v = verdict([arm("base", "failed"), arm("cpu", "go")])
    assert (v.verdict, v.exit_code) == ("failed", 4)
    v = verdict([arm("base", "baseline"), arm("cpu", "failed")])
    assert v.verdict == "no-go" and "failed" in v.reason
