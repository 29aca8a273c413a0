"""harness compare: decisions and per-step figures with B/A ratios; missing is never 0."""

from __future__ import annotations

from harness.report.compare import compare_summaries, comparison_lines
from harness.schema.intervals import Percentiles
from harness.schema.summary import HitTokens
from tests.support.sample import sample_summary


def test_identical_runs_show_no_change() -> None:
    s = sample_summary()
    cmp = compare_summaries(s, s)
    assert cmp.same_scenario
    assert all(not arm.decision_changed for arm in cmp.arms)
    for arm in cmp.arms:
        for step in arm.steps:
            assert step.ttft_p99_ms.ratio == 1.0
            assert not step.ttft_p99_ms.changed
    assert not any(line.endswith(" *") for line in comparison_lines(cmp))


def test_changes_and_ratios() -> None:
    a = sample_summary()
    arms = list(a.arms)
    cpu_steps = list(arms[1].steps)
    top = cpu_steps[-1]
    assert top.ttft_ms.p99 is not None
    cpu_steps[-1] = top.model_copy(update={"ttft_ms": top.ttft_ms.model_copy(update={"p99": top.ttft_ms.p99 * 2}),
                                           "hit_tokens": HitTokens(missing=["vllm:x"])})
    arms[1] = arms[1].model_copy(update={"decision": "no-go", "steps": cpu_steps})
    b = a.model_copy(update={"arms": arms, "verdict": "no-go", "recommended_arm": None, "run_id": "b",
                             "scenario_hash": "other"})
    cmp = compare_summaries(a, b)
    cpu = next(arm for arm in cmp.arms if arm.name == "cpu")
    assert cpu.decision_a == "go" and cpu.decision_b == "no-go" and cpu.decision_changed
    step = cpu.steps[-1]
    assert step.ttft_p99_ms.ratio == 2.0 and step.ttft_p99_ms.changed
    assert step.hit_rate.b is None and step.hit_rate.ratio is None and step.hit_rate.changed
    lines = comparison_lines(cmp)
    assert "verdict: go → no-go; recommended: cpu → none" in lines
    assert "arm cpu: go → no-go *" in lines
    assert any("scenario hashes differ" in line for line in lines)
    assert "  c32:" in lines
    assert any(line.startswith("    p99 TTFT   1,720 ms [1,580–1,924] n=907 → 3,440 ms") and
               line.endswith("(B/A 2.00x) *") for line in lines)
    assert any("hit rate   77.0% → — (B/A n/a) *" in line for line in lines)
    assert any(line.startswith("ratio intervals: summaries only") for line in lines)


def test_arms_and_steps_present_on_one_side_only() -> None:
    a = sample_summary()
    b = a.model_copy(update={"arms": [a.arms[0], a.arms[1].model_copy(update={"steps": a.arms[1].steps[:2]})]})
    cmp = compare_summaries(a, b)
    tiered = next(arm for arm in cmp.arms if arm.name == "tiered")
    assert tiered.decision_b is None and tiered.decision_changed
    assert all(s.ttft_p99_ms.b is None and s.load_differs for s in tiered.steps)
    cpu = next(arm for arm in cmp.arms if arm.name == "cpu")
    assert cpu.steps[-1].label_b is None and cpu.steps[-1].load_differs
    assert "arm tiered: hold → absent *" in comparison_lines(cmp)


def test_zero_baseline_gives_no_ratio() -> None:
    a = sample_summary()
    arms = list(a.arms)
    steps = [s.model_copy(update={"ttft_ms": Percentiles(p99=0.0, count=1)}) for s in arms[0].steps]
    arms[0] = arms[0].model_copy(update={"steps": steps})
    cmp = compare_summaries(a.model_copy(update={"arms": arms}), a)
    assert cmp.arms[0].steps[0].ttft_p99_ms.ratio is None


def test_unresolved_percentiles_are_marked_not_compared() -> None:
    s = sample_summary()
    cmp = compare_summaries(s, s)
    c4 = cmp.arms[1].steps[0]
    assert c4.ttft_p99_ms.unresolved and not c4.ttft_p99_ms.changed
    lines = comparison_lines(cmp)
    assert any(line.startswith("    p99 TTFT   ≥ 321 ms (n=216, unresolved) → ≥ 321 ms (n=216, unresolved) "
                               "(B/A unresolved (point 1.00x)) ?") for line in lines)
