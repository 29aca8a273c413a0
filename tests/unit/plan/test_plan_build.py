"""``build_plan`` and its human view: golden renderings of the shipped scenarios on a fixed host, the duration
estimate, and arms whose launch spec cannot be built.

Regenerate the golden files with ``UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/plan`` and review the diff."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from rich.console import Console

from harness.config import load_scenario, load_scenario_text
from harness.host.facts import FakeHostFacts
from harness.plan.build import build_plan, estimate_duration_s
from harness.plan.checks import resources
from harness.plan.view import print_plan

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = ROOT / "tests" / "golden" / "plan"
GIB = 1 << 30
HOST = FakeHostFacts(mem_available=256 * GIB, mem_total=512 * GIB, default_disk_free=2000 * GIB,
                     gpu=(True, "8 GPU(s) via the nvidia runtime (fake)"))


def check_golden(path: Path, text: str) -> None:
    """Compare with the golden file exactly; ``UPDATE_GOLDEN=1`` rewrites it instead."""
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.is_file(), f"{path} is missing; create it with UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(encoding="utf-8"), f"{path.name} differs; if intended, rerun with UPDATE_GOLDEN=1"


@pytest.mark.parametrize("name", ["vllm-cpu-pilot", "vllm-tiered", "trtllm-host"])
def test_plan_view_golden(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resources, "ownership", lambda path: "absent")  # the host's real /mnt does not matter
    scenario = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    scenario.set_source_file(f"scenarios/{name}.yaml")  # the same text wherever the checkout lives
    out = io.StringIO()
    print_plan(build_plan(scenario, host=HOST), Console(file=out, width=140, color_system=None, force_terminal=False))
    check_golden(GOLDEN / f"{name}.txt", out.getvalue())


SIM = """
name: sim
engine: {kind: sim, model: m}
arms:
  - {name: baseline, tier: gpu-only}
  - {name: host, tier: cpu, offload: {kind: trtllm, host_cache_size: 1073741824}}
workload:
  classes: [{name: c, weight: 1, prompt_tokens: {min: 1, max: 10}, output_tokens: {min: 1, max: 10}}]
steps:
  warmup: {duration_s: 5}
  levels: [{concurrency: 1, duration_s: 10}, {concurrency: 2, requests: 50}]
drills: [{kind: restart, arm: host, before_s: 1, during_s: 2, after_s: 3}]
"""


def test_an_arm_that_cannot_be_built_is_an_error_not_a_crash() -> None:
    plan = build_plan(load_scenario_text(SIM, "sim.yaml"), host=HOST)
    assert not plan.ok and plan.simulated
    host_arm = plan.arms[1]
    assert host_arm.error is not None and host_arm.command == "" and host_arm.argv == []
    names = [(c.name, c.level, c.arm) for c in plan.checks if c.level == "error"]
    assert ("offload-form", "error", "host") in names and ("launch-spec", "error", "host") in names
    out = io.StringIO()
    print_plan(plan, Console(file=out, width=200, color_system=None))
    assert "cannot build:" in out.getvalue() and "(SIMULATED engine)" in out.getvalue()


def test_estimate_counts_readiness_steps_and_drills() -> None:
    scenario = load_scenario_text(SIM, "sim.yaml")
    seconds, note = estimate_duration_s(scenario)
    # per arm: 3 s readiness + 5 s warm-up + 10 s step + 2 x 2 s boundaries = 22; two arms; drill 6 s
    assert seconds == pytest.approx(2 * 22 + 6)
    assert note == "levels bounded only by a request count are not included in the estimate"


def test_estimate_on_the_virtual_clock_is_modelled_time_without_readiness() -> None:
    virtual = load_scenario_text(SIM, "sim.yaml", ["engine.sim_clock=virtual"])
    seconds, _ = estimate_duration_s(virtual)
    assert seconds == pytest.approx(2 * 19 + 6)  # readiness is immediate on the virtual clock: 3 s less per arm
    plan = build_plan(virtual, host=HOST)
    assert (plan.clock, plan.estimated_duration_s) == ("virtual", pytest.approx(44))
    out = io.StringIO()
    print_plan(plan, Console(file=out, width=400, color_system=None))
    line = next(t for t in out.getvalue().splitlines() if t.startswith("Estimated duration"))
    assert line.startswith("Estimated duration: 0.7 modelled min on the virtual clock (levels bounded only by")
    assert "not wall time" in line
    real = build_plan(load_scenario_text(SIM, "sim.yaml"), host=HOST)
    assert real.clock == "real"
    out = io.StringIO()
    print_plan(real, Console(file=out, width=400, color_system=None))
    line = next(t for t in out.getvalue().splitlines() if t.startswith("Estimated duration"))
    assert line.startswith("Estimated duration: 0.8 min (") and "modelled" not in line and "wall" not in line


def test_estimate_counts_the_baselines_aa_rerun_without_a_search() -> None:
    base = load_scenario_text(SIM, "sim.yaml")
    rerun = load_scenario_text(SIM, "sim.yaml", ["rules.noise_floor.rerun_baseline=true"])
    assert estimate_duration_s(rerun)[0] == pytest.approx(estimate_duration_s(base)[0] + 22)  # one arm more


def test_plan_steps_and_json_round_trip() -> None:
    plan = build_plan(load_scenario_text(SIM, "sim.yaml"), host=HOST)
    assert plan.steps == ["c1 for 10 s", "c2 for 50 req"]
    assert plan.source_file == "sim.yaml"
    assert type(plan).model_validate_json(plan.model_dump_json()) == plan
