"""Decisions per arm and the verdict chain: harm is no-go, missing evidence is hold, a shared breach is slo-unmet,
an arm that could not be judged is never no-go."""

from __future__ import annotations

from harness.decision.decide import decide_arm, mark_shared, verdict
from harness.schema.summary import ArmFailure, ArmSummary, RuleResult


def rr(status: str, kind: str = "budget", critical: bool = False, dry_run: bool = False, rule: str = "r") -> RuleResult:
    return RuleResult(rule=rule, kind=kind, status=status, critical=critical, dry_run=dry_run,  # type: ignore[arg-type]
                      message=f"{rule} {status}")


def decide(rules: list[RuleResult], *, shared: set[str] | None = None, baseline: bool = False,
           failure: ArmFailure | None = None) -> str:
    decision, reasons, _findings = decide_arm(is_baseline=baseline, failure=failure, ran=True,
                                   rules=mark_shared(rules, shared or set()), prev_name="baseline")
    assert reasons
    return decision


def test_arm_decisions() -> None:
    assert decide([rr("pass"), rr("pass", "earns_keep")]) == "go"
    assert decide([rr("breach", critical=True)]) == "no-go"
    assert decide([rr("breach", "regression")]) == "no-go"
    assert decide([rr("breach", "earns_keep")]) == "hold"
    assert decide([rr("unresolved", "regression")]) == "hold"
    assert decide([rr("unresolved", "budget", critical=True)]) == "hold"  # never a silent pass
    assert decide([rr("breach", dry_run=True)]) == "go"
    assert decide([rr("breach")]) == "hold"  # a non-critical breach of the tier's own: not a veto on its own
    assert decide([rr("breach")], baseline=True) == "baseline"
    assert decide([], failure=ArmFailure(phase="start", message="boom")) == "failed"


def test_cause_and_fit_rules_hold_never_veto() -> None:
    assert decide([rr("pass", "earns_keep"), rr("breach", "causal")]) == "hold"
    assert decide([rr("pass", "earns_keep"), rr("unresolved", "causal")]) == "hold"
    assert decide([rr("pass", "earns_keep"), rr("breach", "fit")]) == "hold"


def test_shared_breach_is_the_slo_not_the_tier_critical_or_not() -> None:
    assert decide([rr("breach", critical=True), rr("pass", "earns_keep")], shared={"r"}) == "slo-unmet"
    assert decide([rr("breach"), rr("pass", "earns_keep")], shared={"r"}) == "slo-unmet"
    # the tier's own harm still decides, and missing evidence still holds
    assert decide([rr("breach", critical=True), rr("breach", "regression", rule="reg")], shared={"r"}) == "no-go"
    assert decide([rr("breach", critical=True), rr("unresolved", "earns_keep", rule="k")], shared={"r"}) == "hold"


def test_tier_health_warning_does_not_decide_but_a_veto_does() -> None:
    assert decide([rr("pass", "earns_keep"), rr("breach", "tier_health")]) == "go"
    assert decide([rr("pass", "earns_keep"), rr("breach", "tier_health", critical=True)]) == "no-go"


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
    v = verdict([arm("base", "baseline"), arm("cpu", "slo-unmet")])
    assert (v.verdict, v.exit_code) == ("slo-unmet", 5) and "not met by any arm" in v.reason


def test_a_tier_that_could_not_start_is_hold_not_no_go() -> None:
    v = verdict([arm("base", "baseline"), arm("cpu", "failed")])
    assert (v.verdict, v.exit_code) == ("hold", 3) and "could not be judged" in v.reason
