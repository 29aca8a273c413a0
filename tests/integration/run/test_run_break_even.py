"""The break-even load in a real (simulated) rollout: a CPU tier behind a slow host link on a KV-starved server
(``break-even-sim.yaml``; the physics are in its comments) hurts at 2 users and pays at 64, and the summary, the
verdict line and summary.md say where it starts to pay, between the right steps, with the intervals that show it.

Nothing in the scenario names an outcome; the test checks only what the rows of the effect table say and that the
break-even is placed between them. The placement is the point, so the rollout (two arms x three steps) runs on
the virtual clock (``engine.sim_clock: virtual``) with 36 s steps: the same physics, deterministic, whatever the
host's load."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.run.options import RunOptions
from harness.run.orchestrator import run_rollout
from harness.schema.summary import Summary

pytestmark = [pytest.mark.slow, pytest.mark.timeout(480)]
HERE = Path(__file__).resolve().parent
STEP_S = 36.0


@pytest.fixture(scope="module")
def rollout(tmp_path_factory: pytest.TempPathFactory) -> tuple[Summary, Path]:
    work = tmp_path_factory.mktemp("break-even")
    data = yaml.safe_load((HERE / "break-even-sim.yaml").read_text(encoding="utf-8"))
    data["engine"]["sim_profile_file"] = str(HERE / "break-even-profile.yaml")
    data["engine"]["sim_clock"] = "virtual"
    for level in data["steps"]["levels"]:  # 3x the yaml's 12 s: a virtual minute is cheap, and 12 s steps left
        level["duration_s"] = STEP_S      # the c2 harm and the c64 gain unsettled on the noise-free virtual clock
    path = work / "break-even-sim.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    result = run_rollout(path, RunOptions(out_dir=work / "runs"), say=lambda *_: None)
    assert result.summary is not None and result.run_dir is not None, result.message
    return result.summary, result.run_dir


def test_the_break_even_lies_between_the_step_that_hurts_and_the_step_that_pays(
        rollout: tuple[Summary, Path]) -> None:
    summary, _ = rollout
    tier = summary.arms[1]
    assert tier.failure is None and tier.effects, tier.reasons
    be = tier.break_even
    assert be is not None, tier.reasons
    outcomes = {(r.label, r.measure): r.outcome for r in tier.effects}
    assert be.status == "crossover", (be.text, outcomes)
    # the tier hurts at the lowest load and pays at the highest, and never the other way round there
    assert "c2" in be.harm_steps and "c2" not in be.improvement_steps, be.text
    assert "c64" in be.improvement_steps and "c64" not in be.harm_steps, be.text
    assert be.harm_up_to is not None and be.improvement_from is not None
    order = ["c2", "c16", "c64"]
    assert order.index(be.harm_up_to.label) <= order.index(be.improvement_from.label), be.text
    # the rows that place it carry the intervals that show it, against their limits
    harm, gain = be.harm_up_to, be.improvement_from
    assert harm.interval.resolved and harm.limit is not None and harm.interval.lo is not None
    assert (harm.interval.lo > harm.limit) if harm.outcome == "harm shown" else \
        (harm.interval.hi is not None and harm.interval.hi < 1.0 / harm.floor)
    assert gain.interval.resolved and gain.limit is not None and gain.interval.lo is not None
    assert gain.interval.lo >= gain.limit
    assert gain.source.startswith(f"requests.parquet, step {gain.step} ({gain.label}):")


def test_the_verdict_line_and_summary_md_state_it(rollout: tuple[Summary, Path]) -> None:
    summary, run_dir = rollout
    tier = summary.arms[1]
    assert tier.break_even is not None
    assert f"break-even of {tier.name}: " in summary.verdict_reason
    text = (run_dir / "summary.md").read_text(encoding="utf-8")
    assert "### Effect sizes: what each tier bought, with what certainty" in text
    assert f"- **{tier.name}** break-even: " in text
    assert any(line.startswith(f"| {tier.name} | c64 | output tokens/s |") for line in text.splitlines())
    # the first reason is the rule that decided the arm
    first = tier.reasons[0]
    if tier.decision == "no-go":
        assert first.startswith("ttft-p90-vs-baseline: regressed"), tier.reasons
    elif tier.decision == "go":
        assert first.startswith("earns-its-keep: earns its keep"), tier.reasons
