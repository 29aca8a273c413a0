"""Proof of state and of use in the decision: a start not shown cold holds an arm that would be ``go``; predicted
and measured tier hits far apart are a fit-screen warning naming both figures."""

from __future__ import annotations

from harness.decision.cold_start import baseline_warning, cold_start_of, cold_start_rule
from harness.decision.decide import decide_arm
from harness.decision.hit_prediction import MAX_GAP, calibration_of, prediction_items
from harness.rundir.entries import ArmEvent
from harness.schema.cold_start import ColdStart, HitPrediction, PredictedStep, TierShares
from harness.schema.summary import RuleResult
from harness.workload.tokens import EXACT_WORDS

GO_RULES = [RuleResult(rule="earns-keep", kind="earns_keep", status="pass", message="improved 1.3x"),
            RuleResult(rule="own-tier-hits", kind="causal", status="pass", message="the cpu tier served 10")]
WARM = ColdStart(cold=False, reasons=["disk tier /t held 4 files (40 bytes) at the arm's start"])


def event(arm: str, proof: ColdStart) -> ArmEvent:
    return ArmEvent(arm=arm, event="cold-start", cold_start=proof.model_dump(mode="json"))  # type: ignore[call-arg]


def test_the_latest_start_of_the_arm_counts() -> None:
    events = [event("cpu", WARM), event("other", ColdStart(cold=True)), event("cpu", ColdStart(cold=True))]
    assert cold_start_of(events, "cpu") == ColdStart(cold=True)
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


def test_a_cold_or_unchecked_start_does_not_decide() -> None:
    assert cold_start_rule(ColdStart(cold=True)) is None
    assert cold_start_rule(ColdStart(cold=None, reasons=["not checked"])) is None
    assert cold_start_rule(None) is None
    assert baseline_warning("base", ColdStart(cold=True)) is None
    assert "base did not start cold" in (baseline_warning("base", WARM) or "")


def prediction(predicted_cpu: float, measured_cpu: float) -> HitPrediction:
    return HitPrediction(model="m", mode="inclusive", block_tokens=16, gpu_tokens=1600, cpu_tokens=16000,
                         steps=[PredictedStep(index=0, label="c8", requests=100,
                                              predicted=TierShares(gpu=0.3, cpu=predicted_cpu, disk=0.0),
                                              measured=TierShares(gpu=0.31, cpu=measured_cpu, disk=0.0))])


def test_a_large_disagreement_is_a_warning_naming_both_figures() -> None:
    (item,) = prediction_items("cpu", prediction(0.40, 0.40 - MAX_GAP - 0.05))
    assert item.name == "hit-prediction-agrees" and item.status == "warn"
    assert "step 0 (c8) cpu: predicted 40.0%, measured 20.0%" in item.evidence
    (ok,) = prediction_items("cpu", prediction(0.40, 0.38))
    assert ok.status == "pass"
    assert prediction_items("cpu", None) == []


def test_the_journaled_calibration_is_read_back() -> None:
    events = [ArmEvent(arm="a", event="tokenizer", calibration=EXACT_WORDS.model_dump(mode="json"))]  # type: ignore[call-arg]
    assert calibration_of(events, "a") == EXACT_WORDS
    assert calibration_of(events, "b") is None
