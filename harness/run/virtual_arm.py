"""The virtual clock's backend (:class:`VirtualBackend`): an arm's simulated engine and its load in this process.

It satisfies :class:`harness.run.backend.ArmBackend` with :mod:`harness.virtual`: a "launch" resolves the arm's
simulator launch spec (the command the real clock would run, journaled and recorded in the manifest as usual) into
an in-process engine on the run's virtual clock; readiness is immediate; the scraper polls on the virtual clock;
host telemetry is recorded as not measured; the cold-start proof, the token calibration and the steps go through the
same code as on the real clock with the engine answering in-process (no HTTP). A fresh arm empties its disk tiers
(in the run's :class:`~harness.virtual.disk.VirtualDisk`; the configured directories are never touched); a restart
keeps them. The simulator never falls behind a virtual clock: ``sim_behind_s`` is 0.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.core.net.bounded import FetchError
from harness.engines import build_launch_spec
from harness.launch.base import LaunchError, RunningServer
from harness.run.arm_server import FreshServer
from harness.run.backend_api import Clock, Sampling, StepScraper, Timed
from harness.run.cold_start import TIMEOUT_S, counters_from, measure_cold_start, probe_answer, probe_prompt, prove_cold
from harness.run.manifest import launch_entry
from harness.schema.cold_start import ColdProbe, ColdStart, DiskTierState
from harness.scrape.telemetry.sampler import scenario_disk_dirs
from harness.secrets.flags import masked_command_line
from harness.virtual.checks import skipped_drill
from harness.virtual.driver import VirtualStepDriver
from harness.virtual.engine import EngineStartError, VirtualEngine
from harness.virtual.scraper import VirtualHostNotes, VirtualScraper
from harness.virtual.world import VirtualWorld
from harness.workload.text import stable_key
from harness.workload.tokens import TokenCalibration, calibrate_tokenizer

if TYPE_CHECKING:
    from harness.engines.spec import LaunchSpec
    from harness.load.step import StepOutcome, StepRun
    from harness.run.arm_handle import ArmHandle

IDENTITY = {"launcher": "virtual", "clock": "virtual"}


class VirtualServer:
    """A :class:`~harness.launch.base.RunningServer` for an engine on the virtual clock."""

    def __init__(self, spec: LaunchSpec, base_url: str, engine: VirtualEngine, log_path: Path) -> None:
        self.spec = spec
        self._url = base_url
        self.engine = engine
        self._log_path = log_path
        self._lines: list[str] = []
        self.say(engine.banner)
        self.say("harness-sim: on the virtual clock (in the harness process; no HTTP)")

    def say(self, line: str) -> None:
        """One line of the server's log."""
        self._lines.append(line)
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        with self._log_path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")

    @property
    def base_url(self) -> str:
        return self._url

    def alive(self) -> bool:
        return self.engine.alive

    def exit_description(self) -> str | None:
        if self.engine.dead is not None:
            return f"died ({self.engine.dead})"
        return "stopped" if self.engine.stopped else None

    def log_tail(self, lines: int = 40) -> list[str]:
        return self._lines[-lines:]

    def stop(self, timeout_s: float = 20.0) -> None:
        if not self.engine.stopped:
            self.engine.stop()
            self.say("harness-sim: stopped")

    def identity(self) -> dict[str, str]:
        return dict(IDENTITY)


class VirtualBackend:
    """:class:`~harness.run.backend.ArmBackend` on the virtual clock of one run's :class:`VirtualWorld`."""

    name = "virtual"

    def __init__(self, world: VirtualWorld) -> None:
        self.world = world
        self.clock: Clock = world.clock

    def _engine(self, server: RunningServer | str) -> VirtualEngine:
        return self.world.engine(server if isinstance(server, str) else server.base_url)

    def start(self, runner: ArmHandle, *, keep_disk_tier: bool, host_port: int | None) -> FreshServer:
        ctx, arm = runner.ctx, runner.arm
        if not keep_disk_tier:
            for tier in arm.fs_tiers():
                removed = self.world.disk.clear(tier.root_dir)
                if removed:
                    ctx.say(f"[{arm.name}] emptied disk tier {tier.root_dir} ({removed} entries from an earlier arm)")
        spec = build_launch_spec(runner.engine, arm, host_port=0)
        shown = masked_command_line(spec.argv())
        ctx.record_arm(arm.name, "starting", command=shown)
        ctx.say(f"[{arm.name}] starting {spec.engine} on the virtual clock (in this process): {shown}")
        entry = launch_entry(spec, {})
        ctx.manifest["launches"].append(entry)
        ctx.save_manifest()
        try:
            url, engine = self.world.start_engine(spec)
        except EngineStartError as exc:
            log = ctx.run.log(arm.name)
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text(exc.message + "\n", encoding="utf-8")
            raise LaunchError(f"the simulated engine refused to start: {exc.message}", phase="start",
                              log_tail=[exc.message]) from None
        return FreshServer(spec, VirtualServer(spec, url, engine, ctx.run.log(arm.name)), entry)

    def wait_ready(self, runner: ArmHandle, fresh: FreshServer) -> None:
        identity = fresh.server.identity()
        fresh.manifest_entry.update(launch_entry(fresh.spec, identity))
        runner.ctx.save_manifest()
        runner.ctx.record_arm(runner.arm.name, "ready", seconds=0.0, identity=identity)
        runner.ctx.say(f"[{runner.arm.name}] ready (virtual clock)")

    def scraper(self, runner: ArmHandle, server: RunningServer) -> StepScraper:
        assert runner.spec is not None
        arm = runner.arm.name

        def source(path: str) -> tuple[int | None, str, str | None]:
            current = runner.server
            if current is None or not current.alive():
                return None, "", "connection refused (the simulated engine is not running)"
            status, body = self._engine(current).exposition(path)
            return (status, body, None) if status == 200 else (status, body[:2000], f"HTTP {status}")

        return VirtualScraper(self.world.queue, source, runner.spec.metrics, runner.ctx.run.metrics_dir(arm),
                              runner.ctx.scenario.steps.scrape_interval_s)

    def host_sampler(self, runner: ArmHandle) -> Sampling:
        return VirtualHostNotes(self.world.queue, runner.ctx.run.metrics_dir(runner.arm.name),
                                runner.ctx.scenario.steps.scrape_interval_s,
                                scenario_disk_dirs(runner.ctx.scenario.arms))

    def prove_cold(self, runner: ArmHandle, server: RunningServer) -> ColdStart:
        assert runner.spec is not None
        engine, spec = self._engine(server), runner.spec

        def read() -> tuple[dict[str, float | None], str | None]:
            bodies: dict[str, str] = {}
            for ep in spec.metrics:
                status, body = engine.exposition(ep.path)
                if status != 200:
                    return {}, f"metrics {ep.path}: HTTP {status}"
                bodies.setdefault(ep.format, body)
            return counters_from(bodies, runner.engine)

        def probe() -> ColdProbe:
            start = len(self.world.engines)  # a nonce per arm and start: the same in every run of the scenario
            prompt = probe_prompt((stable_key("cold-probe", runner.arm.name, start),
                                   stable_key("cold-probe-2", runner.arm.name, start)))
            body = {"model": spec.served_model_name, "prompt": prompt, "max_tokens": 1, "stream": False,
                    "temperature": 0}
            status, answer = engine.complete_now(body, "completion", TIMEOUT_S)
            return probe_answer(answer) if status == 200 else ColdProbe(error=f"HTTP {status}")

        tiers = [self._tier_state(t.root_dir) for t in runner.arm.fs_tiers()]
        return prove_cold(runner, server, measured=measure_cold_start(read, tiers, probe))

    def _tier_state(self, root_dir: str) -> DiskTierState:
        files, size = self.world.disk.files(root_dir)
        return DiskTierState(root_dir=root_dir, entries=files, bytes=size)

    def calibrate(self, runner: ArmHandle, server: RunningServer) -> TokenCalibration:
        assert runner.spec is not None
        engine = self._engine(server)

        def post(url: str, body: dict[str, Any]) -> Any:
            if url.endswith("/tokenize"):
                status, answer = engine.tokenize(body)
            else:
                kind = "chat" if url.endswith("/chat/completions") else "completion"
                status, answer = engine.complete_now(body, kind, 10.0)
            if status != 200:
                raise FetchError(f"HTTP {status}")
            return answer

        return calibrate_tokenizer(server.base_url, runner.spec.served_model_name, 10.0, post=post)

    def run_step(self, req: StepRun, cancel: threading.Event | None, timer: Timed | None = None) -> StepOutcome:
        actions = timer.plan() if timer is not None else []
        return VirtualStepDriver(req, self._engine(req.base_url), self.world.queue, actions).run(cancel)

    def behind_s(self, server: RunningServer, spec: LaunchSpec | None) -> float | None:
        return 0.0

    def clear_disk_tiers(self, tiers: Sequence[Path]) -> int:
        return sum(self.world.disk.clear(str(t)) for t in tiers)

    def count_disk_entries(self, tiers: Sequence[Path]) -> int:
        # files and directories, the harness's marker included (a real tier holds one from the arm's start)
        return sum(self.world.disk.entries(str(t)) + 1 for t in tiers)

    def drill_skip(self, kind: str) -> str | None:
        return skipped_drill(kind)
