"""The seam between the conductor and the clock a run runs on: how an arm's server is started, measured and loaded.

:class:`ArmBackend` is everything :class:`harness.run.arm.ArmRunner` (and its drills and capacity probes) needs of a
server and a load generator: start and readiness, the scraper and the host sampler, the proof of a cold start, the
token calibration, running one step (the same :class:`~harness.load.step.StepOutcome` either way), the simulator's lag,
the disk tiers a drill empties or counts, and the clock every stamp is read from. :class:`RealBackend` is the product's
path (a process or container, HTTP, locust, real time); :class:`harness.run.virtual_arm.VirtualBackend` runs the
simulated engine and its load in this process on a virtual clock. The conductor picks one per run
(:func:`harness.run.orchestrator.run_rollout`); nothing after the load stage knows which ran (the manifest records
``clock``).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from harness.host import disk_tier
from harness.launch.base import RunningServer
from harness.launch.external import scrape_target
from harness.run.arm_server import FreshServer, start_fresh, wait_fresh_ready
from harness.run.backend_api import Clock, DrillBackend, Sampling, StepScraper, Timed
from harness.run.cold_start import prove_cold
from harness.run.sim_lag import sim_behind_s
from harness.schema.cold_start import ColdStart
from harness.scrape.scraper import Scraper
from harness.scrape.telemetry.sampler import HostSampler, scenario_disk_dirs
from harness.workload.tokens import TokenCalibration, calibrate_tokenizer

if TYPE_CHECKING:
    from harness.engines.spec import LaunchSpec
    from harness.load.step import StepOutcome, StepRun
    from harness.run.arm_handle import ArmHandle


class ArmBackend(DrillBackend, Protocol):
    """How one arm's server is started, measured and loaded (see the module docstring)."""

    name: str  # "real" | "virtual": the manifest's ``clock``

    def start(self, runner: ArmHandle, *, keep_disk_tier: bool, host_port: int | None) -> FreshServer:
        """Start the arm's server (not waiting for readiness); raises LaunchError."""

    def wait_ready(self, runner: ArmHandle, fresh: FreshServer) -> None:
        """Wait until the server is ready (journaled); raises LaunchError."""

    def scraper(self, runner: ArmHandle, server: RunningServer) -> StepScraper:
        """The arm's scraper (not started)."""

    def host_sampler(self, runner: ArmHandle) -> Sampling:
        """The arm's host telemetry (not started)."""

    def prove_cold(self, runner: ArmHandle, server: RunningServer) -> ColdStart:
        """Check (and journal) that the just-started server is cold."""

    def calibrate(self, runner: ArmHandle, server: RunningServer) -> TokenCalibration:
        """The server's token calibration."""

    def behind_s(self, server: RunningServer, spec: LaunchSpec | None) -> float | None:
        """The simulator's cumulative lag behind its clock (None: not a simulator, not known)."""


class RealClock:
    """``time.perf_counter_ns`` and ``time.time_ns``."""

    def mono_ns(self) -> int:
        """``time.perf_counter_ns()``."""
        return time.perf_counter_ns()

    def wall_ns(self) -> int:
        """``time.time_ns()``."""
        return time.time_ns()


def count_entries(path: Path) -> int:
    """Files and directories under ``path`` (links not followed; 0 when it cannot be read)."""
    count = 0
    with contextlib.suppress(OSError):
        for _root, dirs, files in os.walk(path, followlinks=False):
            count += len(files) + len(dirs)
    return count


class RealBackend:
    """The product's path: a fresh process or container per arm, HTTP, the locust load generator, real time."""

    name = "real"

    def __init__(self) -> None:
        self.clock: Clock = RealClock()

    def start(self, runner: ArmHandle, *, keep_disk_tier: bool, host_port: int | None) -> FreshServer:
        return start_fresh(runner, keep_disk_tier=keep_disk_tier, port=host_port)

    def wait_ready(self, runner: ArmHandle, fresh: FreshServer) -> None:
        wait_fresh_ready(runner, fresh)

    def scraper(self, runner: ArmHandle, server: RunningServer) -> StepScraper:
        assert runner.spec is not None
        return Scraper(*scrape_target(server.base_url, runner.spec, runner.arm.server),
                       runner.ctx.run.metrics_dir(runner.arm.name), runner.ctx.scenario.steps.scrape_interval_s,
                       cancel=runner.ctx.cancel)

    def host_sampler(self, runner: ArmHandle) -> Sampling:
        return HostSampler(runner.ctx.run.metrics_dir(runner.arm.name), runner.ctx.scenario.steps.scrape_interval_s,
                           scenario_disk_dirs(runner.ctx.scenario.arms))

    def prove_cold(self, runner: ArmHandle, server: RunningServer) -> ColdStart:
        return prove_cold(runner, server)

    def calibrate(self, runner: ArmHandle, server: RunningServer) -> TokenCalibration:
        assert runner.spec is not None
        return calibrate_tokenizer(server.base_url, runner.spec.served_model_name, 10.0, cancel=runner.ctx.cancel)

    def run_step(self, req: StepRun, cancel: threading.Event | None, timer: Timed | None = None) -> StepOutcome:
        from harness.load import run_step

        if timer is None:
            return run_step(req, cancel)
        timer.start()
        try:
            return run_step(req, cancel)
        finally:
            timer.finish()

    def behind_s(self, server: RunningServer, spec: LaunchSpec | None) -> float | None:
        return sim_behind_s(server.base_url, spec)

    def clear_disk_tiers(self, tiers: Sequence[Path]) -> int:
        return sum(disk_tier.clear_contents(t) for t in tiers)

    def count_disk_entries(self, tiers: Sequence[Path]) -> int:
        return sum(count_entries(t) for t in tiers)

    def drill_skip(self, kind: str) -> str | None:
        return None
