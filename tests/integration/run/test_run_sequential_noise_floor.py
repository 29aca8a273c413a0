"""Sequential steps and the A/A noise floor in a real (simulated) rollout, and the verdicts a rebuilt summary gives
when the same measurements meet other rules: a budget every arm breaks is ``slo-unmet``, never the tier's no-go."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness.decision.summarize import rebuild_summary
from harness.run.options import RunOptions
from harness.run.orchestrator import run_rollout
from tools.decision_bench.cases import scenario

# On the virtual clock (the verdicts and the settled look are the point; host load must not make a step
# host-contended), at sim_time_scale 1.0: 48 s steps are the same modelled load as the real-time test's 12 s steps at
# time scale 0.25 (the test checks that the tier's step settles at a look before its end).
STEP_S = 48.0


@pytest.fixture(scope="module")
def benefit_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("sequential")
    data = scenario("benefit", 5, str(work / "kv-tier"), step_s=STEP_S)
    data["steps"]["levels"] = [{"concurrency": 24, "duration_s": STEP_S}]
    data["rules"]["noise_floor"] = {"rerun_baseline": True}
    data["engine"].update(sim_clock="virtual", sim_time_scale=1.0)
    path = work / "benefit.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    result = run_rollout(path, RunOptions(out_dir=work / "runs", write_reports=False), say=lambda *_: None)
    assert result.run_dir is not None and result.summary is not None, result.message
    return result.run_dir


def test_a_settled_tier_step_ends_early_and_the_load_time_saved_is_reported(benefit_run: Path) -> None:
    summary = rebuild_summary(benefit_run)
    tier = summary.arms[1]
    assert tier.decision == "go", tier.reasons
    step = tier.steps[0]
    assert step.ended_early and step.stop_reason and "settled" in step.stop_reason
    assert step.planned_duration_s == STEP_S and step.duration_s < STEP_S
    assert summary.load_time.used_s < summary.load_time.planned_s and summary.load_time.steps_ended_early >= 1
    assert summary.statistics.sequential and "Bonferroni" in summary.statistics.sequential
    spans = [json.loads(line) for line in (benefit_run / "steps.jsonl").read_text().splitlines()]
    assert any(s["arm"] == tier.name and s["ended_early"] for s in spans)
    for arm in summary.arms:  # every percentile carries its sample size and interval
        for st in arm.steps:
            assert st.ttft_ms.p95_ci is not None and st.ttft_ms.p95_ci.n == st.ttft_ms.count > 0


def test_the_baseline_re_run_gives_a_noise_floor(benefit_run: Path) -> None:
    summary = rebuild_summary(benefit_run)
    floor = summary.noise_floor
    assert floor is not None and floor.arm == "baseline~aa" and floor.items and floor.steps
    assert floor.factor is not None and floor.factor >= 1.0 and 0 in floor.per_step
    assert all(not s.ended_early for s in floor.steps), "the A/A re-run always runs its full duration"
    assert [a.name for a in summary.arms] == ["baseline", "cpu-16g"]  # the re-run is not an arm to decide on


def test_a_budget_every_arm_breaks_is_the_slo_not_the_tier(benefit_run: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(benefit_run, copy)
    data = yaml.safe_load((copy / "scenario.yaml").read_text())
    data["slo"]["ttft_p99_ms"] = 1.0  # no arm can meet a 1 ms p99 TTFT
    data["rules"]["window_s"] = 1.0  # enough windows for a sustained breach in these short steps
    (copy / "scenario.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    summary = rebuild_summary(copy)
    assert summary.arms[0].rules[0].status == "breach"
    assert summary.arms[1].decision == "slo-unmet", summary.arms[1].reasons
    assert summary.verdict == "slo-unmet" and summary.exit_code == 5 and "not met by any arm" in summary.verdict_reason
