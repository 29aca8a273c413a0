"""What the helpers of one arm's session (its server start, live guard, capacity search, drills) may use of the arm
being run: :class:`ArmHandle`, which :class:`harness.run.arm.ArmRunner` satisfies.

The helpers read the run's context, the arm, its engine and its current server through it, and run steps with it;
they never write into it. What they create (a launch spec, a server) they return, and the runner keeps it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from harness.config.arms import Arm
    from harness.config.engine import EngineSpec
    from harness.config.steps import StepLevel
    from harness.engines.spec import LaunchSpec
    from harness.launch.base import RunningServer
    from harness.load.step import StepRun
    from harness.run.arm_errors import StepProblem
    from harness.run.backend_api import DrillBackend
    from harness.run.context import RunContext


class ArmHandle(Protocol):
    """One arm being run, as its helpers see it (read-only: the runner alone assigns its fields)."""

    @property
    def ctx(self) -> RunContext:
        """The run: scenario, run directory, journals, cancel event, progress output."""

    @property
    def arm(self) -> Arm:
        """The arm being run."""

    @property
    def engine(self) -> EngineSpec:
        """The engine spec with the arm's overrides applied."""

    @property
    def backend(self) -> DrillBackend:
        """How the arm's steps run and its disk tiers are emptied or counted, and the clock its stamps come from."""

    @property
    def spec(self) -> LaunchSpec | None:
        """How the arm's server was launched (None before the first launch)."""

    @property
    def server(self) -> RunningServer | None:
        """The arm's current server (None before the first start; after a restart, the new one)."""

    def launch(self, *, keep_disk_tier: bool = False, host_port: int | None = None) -> RunningServer:
        """Start the arm's server again (or attach to it) and wait until it is ready; raises LaunchError."""

    def step_run(self, base_url: str, tokenizer: Any, index: int, label: str, level: StepLevel,
                 **extra: Any) -> StepRun:
        """The load generator's request for one step; journals the step's new attempt."""

    def run_journaled_step(self, server: RunningServer, scraper: Any, tokenizer: Any, index: int, label: str,
                           level: StepLevel, journal_extra: dict[str, Any] | None = None,
                           **extra: Any) -> StepProblem | None:
        """Run one step and journal it; returns why it could not go on, or None. Raises ArmInterrupted on cancel."""
