"""Host contention is never charged to the engine: a step over its host-contention budget (the simulator behind the
wall clock by more than ``rules.host_contention.max_sim_behind_share`` of the step, or a saturated load generator)
cannot produce a no-go or a go — its comparisons are marked ``host-contended`` and do not decide, the clean steps
decide, and with no clean step the arm holds for host contention — and an A/A step that was host-contended does
not set the noise floor. Intervals are fixed per step (the interval functions are replaced), so only the marking
is under test."""

from __future__ import annotations

import math
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from harness.config import ScenarioError, load_scenario_text
from harness.config.rules import HostContentionSpec
from harness.config.scenario import Scenario
from harness.decision import evidence, noise_floor
from harness.decision.break_even import break_even
from harness.decision.decide import decide_arm
from harness.decision.effects import effect_rows
from harness.decision.evaluate import ArmData, evaluate_arm
from harness.decision.evidence import StepSample
from harness.decision.rules import keep
from harness.decision.rules.errors import evaluate_errors
from harness.decision.rules.load_host import judge_step, judged_steps
from harness.report.html import render_html
from harness.report.markdown import render_markdown
from harness.schema.intervals import Percentiles, QuantileCI, RatioCI
from harness.schema.summary import ClientHealth, StepSummary
from tests.support.sample import sample_summary

SCENARIO = """
name: contention
engine: {kind: sim, model: m, launcher: process}
arms:
  - {name: baseline, tier: gpu-only}
  - {name: tiered, tier: tiered, offload: {kind: vllm-connector, spec_name: TieringOffloadingSpec,
     cpu_bytes_to_use: 1073741824, secondary_tiers: [{root_dir: /tmp/kv-contention}]}}
workload:
  classes: [{name: c, weight: 1, prompt_tokens: {min: 100, max: 200}, output_tokens: {min: 4, max: 8}}]
steps: {levels: [{concurrency: 8, duration_s: 20}, {concurrency: 32, duration_s: 20}]}
slo: {ttft_p99_ms: 2000}
rules:
  window_s: 10
  require_own_tier_hits: false
  budgets: [{metric: ttft, breach_windows: 1, of_last: 1, critical: true}]
  regression: [{metric: ttft, percentile: 90, max_ratio: 1.10, min_samples: 20}]
  earns_keep: {measures: [output_tokens_per_s], min_improvement: 1.05, min_samples: 10}
"""
SPEC = HostContentionSpec()


def ci(lo: float, hi: float) -> RatioCI:
    return RatioCI(ratio=math.sqrt(lo * hi), lo=lo, hi=hi, resolved=True, confidence=0.99, method="fixed")


def scenario(**host_contention: Any) -> Scenario:
    text = SCENARIO + (f"  host_contention: {host_contention}\n".replace("'", "") if host_contention else "")
    return load_scenario_text(text, "s.yaml")


def step(index: int, *, behind: float | None = 0.1, saturated: bool = False, p99: float = 500.0,
         errors: int = 0) -> StepSummary:
    """A 20 s step of 400 requests; ``behind``: the simulator's seconds behind the wall clock."""
    q = QuantileCI(lo=0.8 * p99, hi=1.2 * p99, resolved=True, n=400)
    return StepSummary(index=index, label=f"c{8 * 4 ** index}", concurrency=8 * 4 ** index, duration_s=20.0,
                       requests=400, errors=errors, error_rate=errors / 400, sim_behind_s=behind,
                       ttft_ms=Percentiles(p99=p99, p99_ci=q, count=400),
                       client=ClientHealth(saturated=saturated, note="load generator saturated: test" if saturated
                                           else None))


def sample(tag: float) -> StepSample:
    """400 requests whose values carry ``tag`` (the fixed intervals are chosen by it)."""
    v = np.full(400, tag)
    return StepSample(ttft=v, e2e=v, itl=v, keys=np.array([f"k{i}" for i in range(400)]), tokens=v,
                      good=np.ones(400), duration_s=20.0)


def arm(name: str, steps: list[StepSummary], tag: float, spec: HostContentionSpec = SPEC) -> ArmData:
    steps = judged_steps(spec, steps)
    data = ArmData(name, pd.DataFrame(), steps)
    data._samples = {s.index: sample(tag + s.index) for s in steps}  # tag + step index picks the interval
    return data


def fix(monkeypatch: pytest.MonkeyPatch, harm: dict[int, RatioCI], gain: dict[int, RatioCI]) -> None:
    """Per step: the regression's interval (``harm``, arm / baseline) and earns-its-keep's (``gain``)."""
    def by_step(table: dict[int, RatioCI]) -> Callable[..., RatioCI]:
        def pick(*args: Any, **kw: Any) -> RatioCI:
            mine = next(a for a in args if isinstance(a, StepSample | np.ndarray))  # the arm's side comes first
            values = mine.tokens if isinstance(mine, StepSample) else mine
            return table[int(values[0]) % 10]
        return pick
    monkeypatch.setattr(evidence, "quantile_ratio", by_step(harm))
    monkeypatch.setattr(keep, "improvement", by_step(gain))


def judge(sc: Scenario, base_steps: list[StepSummary], tier_steps: list[StepSummary]) -> tuple[str, list[str], Any]:
    spec = sc.rules.host_contention
    base, tier = arm("baseline", base_steps, 100.0, spec), arm("tiered", tier_steps, 200.0, spec)
    ev = evaluate_arm(sc, sc.arms[1], 1, tier, base, base, [])
    decision, reasons, _findings = decide_arm(is_baseline=False, failure=None, ran=True, rules=ev.results,
                                   prev_name="baseline")
    return decision, reasons, ev


# --- the budget -------------------------------------------------------------------------------------------------


def test_a_step_is_host_contended_over_its_budget_with_the_figures() -> None:
    assert judge_step(SPEC, step(0, behind=0.9)) is None  # 4.5% of 20 s: within 5%
    hc = judge_step(SPEC, step(1, behind=13.6))
    assert hc is not None and hc.sim_behind_share == 0.68 and hc.max_sim_behind_share == 0.05
    assert "13.60 s behind the wall clock in 20 s (68.0%; budget 5%)" in hc.message
    close = judge_step(SPEC, step(0, behind=1.004))
    assert close is not None and "(5.02% > budget 5%)" in close.message
    sat = judge_step(SPEC, step(0, behind=None, saturated=True))
    assert sat is not None and sat.client_saturated and "saturated" in sat.message
    assert judge_step(HostContentionSpec(client_saturation=False), step(0, behind=None, saturated=True)) is None
    assert judge_step(HostContentionSpec(max_sim_behind_share=0.8), step(1, behind=13.6)) is None


def test_the_budget_is_a_validated_scenario_field() -> None:
    assert scenario().rules.host_contention == HostContentionSpec()
    assert scenario(max_sim_behind_share=0.2).rules.host_contention.max_sim_behind_share == 0.2
    with pytest.raises(ScenarioError, match="max_sim_behind_share"):
        scenario(max_sim_behind_share=0)
    with pytest.raises(ScenarioError, match="max_sim_behind"):
        scenario(max_sim_behind=0.1)


# --- a contended step never decides -----------------------------------------------------------------------------


def test_harm_at_a_contended_step_is_not_a_no_go(monkeypatch: pytest.MonkeyPatch) -> None:
    # step 1: the tier's simulator fell 68% behind, the p90 ratio 3.1x and p99 over the critical budget
    fix(monkeypatch, harm={0: ci(0.7, 0.9), 1: ci(2.8, 3.5)}, gain={0: ci(1.3, 1.5), 1: ci(0.5, 0.6)})
    decision, reasons, ev = judge(scenario(), [step(0), step(1)],
                                  [step(0), step(1, behind=13.6, p99=5000.0, errors=200)])
    assert decision == "go", reasons  # decided by the clean step 0
    by_kind = {(r.kind, r.step): r for r in ev.results}
    contended = by_kind[("regression", 1)]
    assert contended.status == "not-applicable" and contended.reason_code == "host-contended"
    assert "tiered step 1 (c32): the simulator fell 13.60 s behind" in contended.message
    assert by_kind[("regression", 0)].status == "pass"
    budget = next(r for r in ev.results if r.kind == "budget")
    assert budget.status == "pass" and "host-contended, not judged" in budget.message
    errors = next(r for r in ev.results if r.kind == "errors")
    assert errors.status == "pass" and "host-contended" in errors.message
    assert any(r.startswith("not deciding — ttft-p90-vs-baseline: host-contended") for r in reasons)
    rows = effect_rows(ev, baseline="baseline", min_improvement=1.05)
    assert {(r.test, r.step): r.outcome for r in rows}[("harm", 1)] == "host-contended"
    assert {(r.test, r.step): r.outcome for r in rows}[("improvement", 1)] == "host-contended"


def test_an_improvement_at_a_contended_step_is_not_a_go(monkeypatch: pytest.MonkeyPatch) -> None:
    # the baseline's step 1 was host-contended (slow): the tier looks much better there, and only there
    fix(monkeypatch, harm={0: ci(0.9, 1.05), 1: ci(0.3, 0.4)}, gain={0: ci(0.98, 1.08), 1: ci(2.0, 2.5)})
    decision, reasons, ev = judge(scenario(), [step(0), step(1, behind=4.0)], [step(0), step(1)])
    assert decision == "hold", reasons
    kept = ev.keep.result if ev.keep is not None else None
    assert kept is not None and kept.status == "unresolved" and "baseline step 1 (c32)" in kept.message
    assert kept.reason_code is None  # held by the clean step's open comparison, not by contention


def test_with_no_clean_step_the_arm_holds_for_host_contention(monkeypatch: pytest.MonkeyPatch) -> None:
    fix(monkeypatch, harm={0: ci(2.0, 2.4), 1: ci(2.8, 3.5)}, gain={0: ci(1.3, 1.5), 1: ci(1.3, 1.5)})
    decision, reasons, ev = judge(scenario(), [step(0), step(1)],
                                  [step(0, behind=2.1), step(1, behind=13.6, p99=5000.0)])
    assert decision == "hold", reasons
    assert reasons[0].split(":", 1)[1].strip().startswith("host contention"), reasons[0]
    for kind in ("regression", "earns_keep", "budget", "errors"):
        rs = [r for r in ev.results if r.kind == kind]
        assert rs and all(r.status == "unresolved" and r.reason_code == "host-contended" for r in rs), kind


def test_a_saturated_load_generator_is_host_contention_too(monkeypatch: pytest.MonkeyPatch) -> None:
    fix(monkeypatch, harm={0: ci(0.7, 0.9), 1: ci(2.8, 3.5)}, gain={0: ci(1.3, 1.5), 1: ci(1.3, 1.5)})
    decision, _, ev = judge(scenario(), [step(0), step(1)], [step(0), step(1, behind=None, saturated=True)])
    assert decision == "go"
    assert next(r for r in ev.results if r.kind == "regression" and r.step == 1).reason_code == "host-contended"
    decision, _, _ = judge(scenario(client_saturation=False), [step(0), step(1)],
                           [step(0), step(1, behind=None, saturated=True)])
    assert decision == "no-go"  # the same figures, judged: the harm at step 1 decides


def test_errors_at_a_contended_step_are_not_the_tiers() -> None:
    mine, prev = [step(0), step(1, errors=100)], [step(0), step(1)]
    assert evaluate_errors(0.01, mine, prev, "baseline").status == "breach"
    out = evaluate_errors(0.01, mine, prev, "baseline", contended={1: "tiered step 1 (c32): behind"})
    assert out.status == "pass" and "tiered step 1 (c32): behind" in out.message
    alone = evaluate_errors(0.01, [step(1, errors=100)], [step(1)], "baseline", contended={1: "x"})
    assert alone.status == "unresolved" and alone.reason_code == "host-contended"


# --- the A/A re-run --------------------------------------------------------------------------------------------


def _floor(monkeypatch: pytest.MonkeyPatch, rerun_steps: list[StepSummary],
           base_steps: list[StepSummary]) -> Any:
    drifts = iter([ci(1.02, 1.08), ci(1.20, 1.40)])  # step 0: 1.02; step 1: 1.20 (one measure per step)
    monkeypatch.setattr(noise_floor, "improvement", lambda *a, **k: next(drifts))
    sc = load_scenario_text(SCENARIO + "  noise_floor: {rerun_baseline: true, measures: [ttft_p50]}\n", "s.yaml")
    rerun_steps = judged_steps(SPEC, rerun_steps)
    base = arm("baseline", base_steps, 100.0)
    return noise_floor.noise_floor(sc, {"baseline~aa": SimpleNamespace(steps=rerun_steps)}, base, pd.DataFrame(),
                                   0.95)


def test_an_aa_drift_from_a_contended_step_does_not_set_the_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    clean = _floor(monkeypatch, [step(0), step(1)], [step(0), step(1)])
    assert clean.per_step == {0: 1.02, 1: 1.2} and clean.factor == 1.2 and not clean.host_contended
    # the baseline ran beside a busy host at step 1 (its simulator 30% behind), the re-run on a quiet one
    busy = _floor(monkeypatch, [step(0), step(1)], [step(0), step(1, behind=6.0)])
    assert busy.per_step == {0: 1.02} and busy.factor == 1.02
    assert set(busy.host_contended) == {1} and "baseline step 1 (c32): the simulator fell 6.00 s" in \
        busy.host_contended[1]
    assert [i.host_contended for i in busy.items] == [False, True]
    assert "step 1 sets no floor, host-contended" in busy.message


def test_with_every_aa_step_contended_there_is_no_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    out = _floor(monkeypatch, [step(0, saturated=True), step(1, behind=6.0)], [step(0), step(1)])
    assert out.factor is None and out.per_step == {} and set(out.host_contended) == {0, 1}
    assert out.message.startswith("No A/A step was clean of host contention: no noise floor")


# --- the reports name the step, the figure and the budget -----------------------------------------------------


def test_the_reports_name_the_contended_step_with_its_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    fix(monkeypatch, harm={0: ci(0.7, 0.9), 1: ci(2.8, 3.5)}, gain={0: ci(1.3, 1.5), 1: ci(0.5, 0.6)})
    tier_steps = [step(0), step(1, behind=13.6)]
    _, _, ev = judge(scenario(), [step(0), step(1)], tier_steps)
    be = break_even(effect_rows(ev, baseline="baseline", min_improvement=1.05), tier_steps)
    assert be is not None and be.text.endswith("; c32 host-contended, not compared")
    summary = sample_summary()
    contended = judge_step(SPEC, step(1, behind=13.6))
    arm = summary.arms[1]
    steps = [s.model_copy(update={"host_contended": contended, "sim_behind_s": 13.6}) if i == 0 else s
             for i, s in enumerate(arm.steps)]
    summary.arms[1] = arm.model_copy(update={"steps": steps})
    md, html = render_markdown(summary), render_html(summary)
    assert "### Host contention (steps that do not decide)" in md
    assert f"- {arm.name} · {steps[0].label}: the simulator fell 13.60 s behind the wall clock" in md
    assert "host-contended, not deciding</span> the simulator fell 13.60 s behind" in html
