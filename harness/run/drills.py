"""Tier drills run on a tiered arm after its steps (cache loss, restart, promotion burst, storage pressure)."""

from __future__ import annotations

from typing import Any

from harness.launch.base import RunningServer
from harness.run.arm_handle import ArmHandle
from harness.run.drill_actions import execute


def run_drills(runner: ArmHandle, server: RunningServer, scraper: Any, tokenizer: Any) -> None:
    """Run the scenario's drills that target this arm (none configured: nothing to do)."""
    drills = [d for d in runner.ctx.scenario.drills if _targets(runner, d.arm)]
    for drill in drills:
        execute(runner, server, scraper, tokenizer, drill)


def _targets(runner: ArmHandle, arm_name: str | None) -> bool:
    if arm_name is not None:
        return arm_name == runner.arm.name
    tiered = [a.name for a in runner.ctx.scenario.arms if a.tier == "tiered"]
    return bool(tiered) and tiered[0] == runner.arm.name
