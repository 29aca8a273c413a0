"""The tier-health rule: a tier that drops stores or fails promotions under load is named (warn or veto)."""

from __future__ import annotations

from harness.config.rules import RulesSpec, TierHealthRule
from harness.decision.rules.tier_health import evaluate_tier_health
from harness.schema.summary import ServerStep, StepSummary
from harness.schema.tier_health import TierFigures, TierHealth


def _step(index: int, health: TierHealth, requests: int = 50) -> StepSummary:
    return StepSummary(index=index, label=f"c{2 ** (index + 1)}", requests=requests,
                       server=ServerStep(tier_health=health))


HEALTHY = TierHealth(stores_dropped=0, blocks_dropped=0, promotion_failures=0, cascade_failures=0,
                     promotion_allocation_failures=0, allocation_failures=0)
DROPPING = TierHealth(stores_dropped=5, blocks_dropped=40, promotion_failures=0, cascade_failures=0,
                      promotion_allocation_failures=0, allocation_failures=0,
                      tiers=[TierFigures(tier="1:fs", stores_dropped=5, blocks_dropped=40)])


def test_defaults_warn_at_the_first_drop() -> None:
    rule = RulesSpec().tier_health
    assert rule == TierHealthRule(max_dropped_stores=0, max_failed_promotions=0, max_failed_cascades=0, action="warn")
    result = evaluate_tier_health(rule, "tiered", "tiered", [_step(0, HEALTHY), _step(1, DROPPING)])
    assert result.kind == "tier_health" and result.status == "breach" and not result.critical
    assert result.step == 1
    assert "warning" in result.message and "tier 1:fs dropped 5 stores (40 blocks)" in result.message


def test_veto_is_critical_and_limits_are_respected() -> None:
    veto = TierHealthRule(action="veto")
    assert evaluate_tier_health(veto, "tiered", "tiered", [_step(0, DROPPING)]).critical
    lenient = TierHealthRule(max_dropped_stores=10)
    assert evaluate_tier_health(lenient, "tiered", "tiered", [_step(0, DROPPING)]).status == "pass"


def test_failed_promotions_count_jobs_and_allocations() -> None:
    failing = HEALTHY.model_copy(update={"promotion_failures": 1, "promotion_allocation_failures": 2})
    result = evaluate_tier_health(TierHealthRule(max_failed_promotions=2), "t", "tiered", [_step(0, failing)])
    assert result.status == "breach" and "failed promotions 3 > 2" in result.message


def test_missing_series_never_pass() -> None:
    result = evaluate_tier_health(TierHealthRule(), "t", "tiered", [_step(0, TierHealth(missing=["x (tier.a)"]))])
    assert result.status == "unresolved" and "x (tier.a)" in result.message


def test_idle_steps_are_not_judged_and_cpu_arm_only_counts_allocation_failures() -> None:
    assert evaluate_tier_health(TierHealthRule(), "t", "tiered", [_step(0, DROPPING, 0)]).status == "unresolved"
    cpu = evaluate_tier_health(TierHealthRule(), "cpu", "cpu", [_step(0, DROPPING)])
    assert cpu.status == "pass"  # no secondary tier: back-pressure drops are not its figures
    bad = HEALTHY.model_copy(update={"allocation_failures": 3})
    cpu_bad = evaluate_tier_health(TierHealthRule(), "cpu", "cpu", [_step(0, bad)])
    assert cpu_bad.status == "breach" and "CPU tier: 3 store allocations failed" in cpu_bad.message


def test_not_applicable_without_a_tier_or_rule() -> None:
    assert evaluate_tier_health(TierHealthRule(), "b", "gpu-only", []).status == "not-applicable"
    assert evaluate_tier_health(None, "t", "tiered", [_step(0, DROPPING)]).status == "not-applicable"
