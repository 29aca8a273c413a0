"""Proof of state and of use in the decision: a start shown warm holds an arm that would be ``go``, a start not
proven does not decide (an older record whose probe alone "passed" reads as not proven); the arm's
journaled calibration is read back (the hit-prediction screen: tests/unit/decision/test_hit_bound.py)."""

from __future__ import annotations

from harness.decision.cold_start import baseline_warning, cold_start_of, cold_start_rule
from harness.decision.decide import decide_arm
from harness.decision.hit_prediction import calibration_of
from harness.rundir.entries import ArmEvent
from harness.schema.cold_start import ColdStart
from harness.schema.summary import RuleResult
from harness.workload.tokens import EXACT_WORDS

GO_RULES = [RuleResult(rule="earns-keep", kind="earns_keep", status="pass", message="improved 1.3x"),
            RuleResult(rule="own-tier-hits", kind="causal", status="pass", message="the cpu tier served 10")]
WARM = ColdStart(proof="warm", reasons=["disk tier /t held 4 files (40 bytes) at the arm's start"])
PROVEN = ColdStart(proof="proven", checked=["counters", "probe"], actions=["fresh-process"])
NOT_PROVEN = ColdStart(proof="not-proven", reasons=["hit counters not read: metrics /metrics: HTTP 500"],
                       checked=["probe"], actions=["fresh-process", "emptied-disk-tier"])


def event(arm: str, proof: ColdStart) -> ArmEvent:
    return ArmEvent(arm=arm, event="cold-start", cold_start=proof.model_dump(mode="json"))  # type: ignore[call-arg]


def test_the_latest_start_of_the_arm_counts() -> None:
    events = [event("cpu", WARM), event("other", PROVEN), event("cpu", PROVEN)]
    assert cold_start_of(events, "cpu") == PROVEN
    assert cold_start_of(events[:1], "cpu") == WARM
    assert cold_start_of(events, "absent") is None


def test_a_warm_start_holds_an_arm_that_would_be_go() -> None:
    assert decide_arm(is_baseline=False, failure=None, ran=True, rules=GO_RULES, prev_name="base")[0] == "go"
    rule = cold_start_rule(WARM)
    assert rule is not None and rule.status == "breach" and rule.kind == "causal"
    decision, reasons, _findings = decide_arm(is_baseline=False, failure=None, ran=True, rules=[*GO_RULES, rule],
                                   prev_name="base")
    assert decision == "hold"
    assert reasons[0].startswith("cold-start:") and "/t held 4 files" in reasons[0]


def test_a_proven_or_not_proven_start_does_not_decide() -> None:
    for proof in (PROVEN, NOT_PROVEN, None):
        assert cold_start_rule(proof) is None
        assert baseline_warning("base", proof) is None
        assert decide_arm(is_baseline=False, failure=None, ran=True, rules=GO_RULES, prev_name="base")[0] == "go"
    assert "base did not start cold" in (baseline_warning("base", WARM) or "")


def test_an_older_record_gets_its_proof_from_what_it_checked() -> None:
    """Before ``proof`` existed a probe alone made ``cold: true``; such a record now reads as not proven."""
    legacy_probe_only = {"cold": True, "reasons": [], "counters": {}, "disk_tiers": [], "checked": ["probe"],
                         "probe": {"prompt_tokens": 96, "cached_tokens": 0, "hit_tokens_delta": None, "error": None}}
    probe_only = ArmEvent(arm="cpu", event="cold-start", cold_start=legacy_probe_only)  # type: ignore[call-arg]
    read = cold_start_of([probe_only], "cpu")
    assert read is not None and (read.proof, read.cold, read.actions) == ("not-proven", None, None)
    legacy = {"cold": True, "checked": ["counters", "probe"], "reasons": []}
    assert ColdStart.model_validate(legacy).proof == "proven"
    assert ColdStart.model_validate({"cold": False, "reasons": ["x"]}).proof == "warm"
    assert ColdStart.model_validate({"cold": None}).proof == "not-proven"


def test_the_journaled_calibration_is_read_back() -> None:
    events = [ArmEvent(arm="a", event="tokenizer", calibration=EXACT_WORDS.model_dump(mode="json"))]  # type: ignore[call-arg]
    assert calibration_of(events, "a") == EXACT_WORDS
    assert calibration_of(events, "b") is None
