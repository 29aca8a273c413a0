"""Helpers for the virtual clock's unit tests: the demo scenario (shortened), its arms' engines on a virtual world,
and step requests as the conductor builds them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from harness.config import Scenario
from harness.config.loader import load_scenario_text
from harness.config.steps import StepLevel
from harness.engines.registry import build_launch_spec
from harness.load.step import StepRun
from harness.virtual.engine import VirtualEngine
from harness.virtual.world import VirtualWorld
from harness.workload.tokens import EXACT_WORDS

DEMO = Path(__file__).resolve().parents[3] / "scenarios" / "demo-sim.yaml"


def demo_scenario(tier_dir: Path, levels: list[dict[str, Any]] | None = None, **workload: Any) -> Scenario:
    """The demo scenario with its disk tier under ``tier_dir`` (and its levels, workload fields replaced)."""
    data = yaml.safe_load(DEMO.read_text())
    if levels is not None:
        data["steps"]["levels"] = levels
    for arm in data["arms"]:
        for tier in arm.get("offload", {}).get("secondary_tiers", []):
            tier["root_dir"] = str(tier_dir)
    data["workload"].update(workload)
    data["engine"]["sim_clock"] = "virtual"
    return load_scenario_text(yaml.safe_dump(data), "demo")


def start(world: VirtualWorld, scenario: Scenario, arm_index: int = 0) -> tuple[str, VirtualEngine]:
    """Start arm ``arm_index``'s engine in ``world``."""
    arm = scenario.arms[arm_index]
    return world.start_engine(build_launch_spec(scenario.engine_for(arm), arm, host_port=0))


def step_run(scenario: Scenario, base_url: str, records: Path, level: StepLevel, index: int = 0,
             **extra: Any) -> StepRun:
    """A step request as :meth:`harness.run.arm.ArmRunner.step_run` builds it."""
    steps = scenario.steps
    return StepRun(base_url=base_url, served_model=scenario.engine.name_served, workload=scenario.workload,
                   level=level, step_index=index, step_label=level.label, arm="baseline", records_dir=records,
                   request_timeout_s=steps.request_timeout_s, stream_idle_timeout_s=steps.stream_idle_timeout_s,
                   drain_timeout_s=steps.drain_timeout_s, max_model_len=scenario.engine.max_model_len,
                   tokenizer=EXACT_WORDS.model_copy(update={"method": "tokenize"}), **extra)
