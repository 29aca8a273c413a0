"""Cause before credit: own-tier hits (measured, inferred, unknown) and the fit screen."""

from __future__ import annotations

from harness.config.arms import Arm
from harness.decision.rules.causal import fit_rule, own_tier_hits
from harness.schema.summary import FitItem, HitTokens, StepSummary

CPU = Arm.model_validate({"name": "cpu", "tier": "cpu",
                          "offload": {"kind": "vllm-native", "kv_offloading_size_gib": 1}})


def st(index: int, *, cpu: int | None = None, cached: int | None = None, requests: int = 100) -> StepSummary:
    return StepSummary(index=index, label=f"c{index}", requests=requests,
                       hit_tokens=HitTokens(cpu=cpu, cached=cached, source="server"))


def test_a_tier_that_served_nothing_cannot_be_credited() -> None:
    result = own_tier_hits(CPU, [st(0, cpu=0), st(1, cpu=0)], [], "baseline")
    assert result.status == "breach" and "no hits at any step" in result.message
    assert own_tier_hits(CPU, [st(0, cpu=0), st(1, cpu=512)], [], "baseline").status == "pass"


def test_hits_not_split_by_tier_are_inferred_and_labelled() -> None:
    mine = [st(0, cached=5000), st(1, cached=9000)]
    theirs = [st(0, cached=5000), st(1, cached=4000)]
    result = own_tier_hits(CPU, mine, theirs, "baseline")
    assert result.status == "pass" and result.message.startswith("INFERRED")
    same = own_tier_hits(CPU, [st(0, cached=5000)], [st(0, cached=5000)], "baseline")
    assert same.status == "breach" and "INFERRED" in same.message


def test_no_hit_figure_at_all_is_unresolved() -> None:
    assert own_tier_hits(CPU, [st(0)], [st(0)], "baseline").status == "unresolved"


def test_fit_screen_warnings_that_say_no_tier_can_help_hold() -> None:
    warn = [FitItem(name="prefixes-come-back", status="warn", evidence="3% repeat")]
    assert fit_rule(warn).status == "breach" and "3% repeat" in fit_rule(warn).message
    other = [FitItem(name="promotion-fits-ttft-budget", status="warn", evidence="slow link")]
    assert fit_rule(other).status == "pass"
