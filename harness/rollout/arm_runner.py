"""Run one arm: fresh server -> readiness -> warm-up -> steps with load and scraping -> (drills) -> stop.

Whatever happens (start-up error, death mid-step, Ctrl-C), the server is stopped and removed, the scraper is
stopped, and every completed request record stays on disk. An arm that fails is journaled with the engine's last
log lines and a cause (``server``, or ``harness`` for the harness's own failures, which ``--resume`` redoes; see
:mod:`harness.rollout.resume_state`); the caller decides whether the run goes on. Every start of a step is journaled
as an attempt, whose number goes into the step's records and its journal entry (:mod:`harness.attempts`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.checks import disk_tier
from harness.config.arms import Arm
from harness.config.engine import EngineSpec
from harness.config.env_refs import resolve_env as resolve_env_refs
from harness.config.steps import StepLevel
from harness.engines import build_launch_spec
from harness.engines.spec import LaunchSpec
from harness.launch.base import LaunchContext, LaunchError, RunningServer
from harness.launch.readiness import wait_ready
from harness.launch.registry import launcher_for
from harness.records import WARMUP_STEP
from harness.rollout.context import RunContext
from harness.rollout.manifest import launch_entry
from harness.rollout.ports import free_port, port_is_free
from harness.rollout.resume_state import ATTEMPT_EVENT, Cause, next_attempt
from harness.secret_flags import masked_command_line

FORCED_STOP_S = 3.0  # a forced stop (second Ctrl-C) waits at most this long for the server to go


class ArmInterrupted(Exception):
    """The run was cancelled (Ctrl-C / SIGTERM) during this arm."""


@dataclass
class ArmResult:
    """How the arm ended."""

    arm: str
    status: str  # completed | failed | interrupted
    steps_done: int
    failure: dict[str, Any] | None = None
    cause: Cause = "server"  # of a failure: the server's, or the harness's own (redone by --resume)


@dataclass(frozen=True)
class StepProblem:
    """Why a step could not go on, and whose failure it was."""

    message: str
    cause: Cause


def resolve_env(env: dict[str, str]) -> dict[str, str]:
    """Expand ``${NAME}`` / ``${NAME:-default}`` values from the harness's environment at launch time (never
    written anywhere); an unset variable without a default is refused (harness/config/env_refs.py)."""
    return resolve_env_refs(env)


def _host_port(engine: EngineSpec) -> int:
    if engine.port and port_is_free(engine.port, engine.host if ":" not in engine.host else "::1"):
        return engine.port
    return free_port()


def _failure(phase: str, message: str, log_tail: list[str]) -> dict[str, Any]:
    return {"phase": phase, "message": message, "log_tail": log_tail[-40:]}


def _level_for_warmup(ctx: RunContext) -> StepLevel | None:
    w = ctx.scenario.steps.warmup
    if w.duration_s <= 0 and w.requests <= 0:
        return None
    return StepLevel(concurrency=w.concurrency, duration_s=w.duration_s or None, requests=w.requests or None)


class ArmRunner:
    """Runs one arm within a run."""

    def __init__(self, ctx: RunContext, arm: Arm, start_step: int = 0) -> None:
        self.ctx = ctx
        self.arm = arm
        self.start_step = start_step
        self.engine = ctx.scenario.engine_for(arm)
        self.server: RunningServer | None = None
        self.spec: LaunchSpec | None = None

    def launch(self, *, keep_disk_tier: bool = False, host_port: int | None = None) -> RunningServer:
        """Start a fresh server and wait until it is ready; raises LaunchError.

        A fresh arm starts with an empty disk tier (caches never carry over between arms or runs); a restart
        drill keeps it (``keep_disk_tier``). Only directories the harness marked as its own are ever emptied."""
        engine = self.engine
        for tier in self.arm.fs_tiers():
            try:
                disk_tier.claim(Path(tier.root_dir), self.ctx.run_id)
                if not keep_disk_tier:
                    removed = disk_tier.clear_contents(Path(tier.root_dir))
                    if removed:
                        self.ctx.say(f"[{self.arm.name}] emptied disk tier {tier.root_dir} ({removed} entries "
                                     "from an earlier arm or run)")
            except (disk_tier.DiskTierError, OSError) as exc:
                raise LaunchError(f"disk tier: {exc}", phase="start") from None
        spec = build_launch_spec(engine, self.arm, host_port=host_port or _host_port(engine))
        spec = spec.model_copy(update={"env": resolve_env(spec.env)})
        self.spec = spec
        launcher = launcher_for(engine.effective_launcher, allow_unpinned=self.ctx.allow_unpinned
                                or self.ctx.scenario.checks.allow_unpinned)
        run = self.ctx.run
        lctx = LaunchContext(run_id=self.ctx.run_id, log_path=run.log(self.arm.name),
                             work_dir=run.root / "launch" / self.arm.name, secrets=self.ctx.secrets)
        self.ctx.record_arm(self.arm.name, "starting", command=masked_command_line(spec.argv()))
        self.ctx.say(f"[{self.arm.name}] starting {spec.engine} ({engine.effective_launcher}): "
                     f"{masked_command_line(spec.argv())}")
        # Recorded before the start, so a launch that fails (the engine refuses its config) keeps its command.
        entry = launch_entry(spec, {})
        self.ctx.manifest["launches"].append(entry)
        self.ctx.save_manifest()
        self._write_compose(spec)
        server = launcher.start(spec, lctx)
        self.server = server
        identity = server.identity()
        entry.update(launch_entry(spec, identity))
        self.ctx.save_manifest()
        waited = wait_ready(server, spec.readiness_timeout_s, cancel=self.ctx.cancel)
        self.ctx.record_arm(self.arm.name, "ready", seconds=round(waited, 3), identity=identity)
        self.ctx.say(f"[{self.arm.name}] ready after {waited:.1f} s at {server.base_url}")
        return server

    def _write_compose(self, spec: LaunchSpec) -> None:
        """A compose file reproducing a container launch; for a local process, a shell script with its command."""
        path = self.ctx.run.compose(self.arm.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        if spec.image:
            from harness.launch.compose import write_compose

            write_compose(spec, f"harness-{self.arm.name}", path.parent, filename=path.name)
            return
        from harness.launch.compose import render_script

        path.with_suffix(".sh").write_text(render_script(spec), encoding="utf-8")

    def run(self) -> ArmResult:
        """The whole arm; never raises for server problems (they become a failed result)."""
        from harness.load import calibrate_tokenizer
        from harness.scrape.scraper import Scraper
        from harness.telemetry.sampler import HostSampler, scenario_disk_dirs

        steps_done = self.start_step
        scraper: Scraper | None = None
        host: HostSampler | None = None
        try:
            try:
                server = self.launch()
            except LaunchError as exc:
                if self.ctx.cancel.is_set():
                    raise ArmInterrupted from None
                return self._fail(exc.phase, exc.message, exc.log_tail, steps_done)
            assert self.spec is not None
            scraper = Scraper(server.base_url, self.spec.metrics, self.ctx.run.metrics_dir(self.arm.name),
                              self.ctx.scenario.steps.scrape_interval_s, cancel=self.ctx.cancel)
            scraper.start()
            host = HostSampler(self.ctx.run.metrics_dir(self.arm.name), self.ctx.scenario.steps.scrape_interval_s,
                               scenario_disk_dirs(self.ctx.scenario.arms))
            host.start()
            tokenizer = calibrate_tokenizer(server.base_url, self.spec.served_model_name, 10.0,
                                            cancel=self.ctx.cancel)
            warm = _level_for_warmup(self.ctx)
            if warm is not None:
                outcome = self._step(server, scraper, tokenizer, WARMUP_STEP, "warmup", warm)
                if outcome is not None:
                    return self._fail("step", outcome.message, self._tail(), steps_done, outcome.cause)
            levels = self.ctx.scenario.steps.levels
            for index in range(self.start_step, len(levels)):
                problem = self._step(server, scraper, tokenizer, index, levels[index].label, levels[index],
                                     **self._sequential(index, levels[index]))
                if problem is not None:
                    return self._fail("step", problem.message, self._tail(), steps_done, problem.cause)
                steps_done = index + 1
            self._after_steps(server, scraper, tokenizer)
            self.ctx.record_arm(self.arm.name, "completed", steps=steps_done)
            return ArmResult(self.arm.name, "completed", steps_done)
        except ArmInterrupted:
            raise
        except Exception as exc:  # the harness's own failure (disk full, a bug): journaled so --resume redoes it
            self._journal_harness_error(exc, steps_done)
            raise
        finally:
            try:
                if host is not None:
                    host.stop()
                if scraper is not None:
                    scraper.stop()
            finally:  # the server is stopped even when the scraper cannot close its file (disk full)
                if self.server is not None:
                    self.server.stop()
                    self.ctx.say(f"[{self.arm.name}] server stopped")

    def _journal_harness_error(self, exc: Exception, steps_done: int) -> None:
        """Best effort (the disk may be full): the arm failed because of the harness, not the server."""
        what = f"{type(exc).__name__}: {exc}"
        try:
            self.ctx.record_arm(self.arm.name, "failed", steps=steps_done, cause="harness",
                                failure=_failure("harness", what, []))
        except OSError:
            return

    def force_stop(self) -> bool:
        """A second Ctrl-C: end the server now (a local process is killed at once; its graceful stop may have been
        cut short), waiting at most about ``FORCED_STOP_S``. True when it is gone."""
        server = self.server
        if server is None:
            return True
        kill = getattr(server, "kill", None)
        if callable(kill) and server.alive():
            kill()
        server.stop(timeout_s=FORCED_STOP_S)
        return not server.alive()

    def _sequential(self, index: int, level: StepLevel) -> dict[str, Any]:
        """Looks for a sequential step (the A/A re-run of the baseline always runs its full duration)."""
        scenario = self.ctx.scenario
        names = [a.name for a in scenario.arms]
        if not scenario.steps.sequential.enabled or self.arm.name not in names:
            return {}
        from harness.load.parts import part_prefix
        from harness.rollout.sequential import StepLooker

        looker = StepLooker(scenario, self.ctx.run, self.arm, names.index(self.arm.name), index,
                            part_prefix(index, level.label), level, attempt=self._attempt(index, level.label))
        looks = looker.looks_s()
        return {"looks_s": looks, "on_look": looker} if looks else {}

    def _after_steps(self, server: RunningServer, scraper: Any, tokenizer: Any) -> None:
        """Hook for drills (see :mod:`harness.rollout.drills`)."""
        from harness.rollout.drills import run_drills

        run_drills(self, server, scraper, tokenizer)

    def _tail(self) -> list[str]:
        return self.server.log_tail(40) if self.server is not None else []

    def _fail(self, phase: str, message: str, tail: list[str], steps_done: int, cause: Cause = "server") -> ArmResult:
        failure = _failure(phase, message, tail)
        self.ctx.record_arm(self.arm.name, "failed", steps=steps_done, failure=failure, cause=cause)
        whose = " — the harness's own failure, not the server's: `harness run --resume` redoes this arm" \
            if cause == "harness" else ""
        self.ctx.say(f"[{self.arm.name}] FAILED ({phase}): {message}{whose}")
        return ArmResult(self.arm.name, "failed", steps_done, failure, cause)

    def _attempt(self, index: int, label: str, drill: str | None = None, drill_phase: str | None = None) -> int:
        """The number the next try of this step will have (see :mod:`harness.attempts`)."""
        from harness.load.parts import find_parts, part_prefix
        from harness.rollout import journal

        earlier = bool(find_parts(self.ctx.run.records_dir(self.arm.name), part_prefix(index, label, drill,
                                                                                         drill_phase)))
        return next_attempt(journal.read(self.ctx.arms_journal), self.arm.name, index, earlier_records=earlier)

    def step_run(self, base_url: str, tokenizer: Any, index: int, label: str, level: StepLevel,
                 **extra: Any) -> Any:
        """The load generator's request for one step (also used by drills); journals the step's new attempt."""
        from harness.load import StepRun

        steps = self.ctx.scenario.steps
        assert self.spec is not None
        attempt = self._attempt(index, label, extra.get("drill"), extra.get("drill_phase"))
        self.ctx.record_arm(self.arm.name, ATTEMPT_EVENT, step=index, label=label, attempt=attempt)
        return StepRun(base_url=base_url, served_model=self.spec.served_model_name, attempt=attempt,
                       workload=self.ctx.scenario.workload, level=level, step_index=index, step_label=label,
                       arm=self.arm.name, records_dir=self.ctx.run.records_dir(self.arm.name),
                       request_timeout_s=steps.request_timeout_s, stream_idle_timeout_s=steps.stream_idle_timeout_s,
                       drain_timeout_s=steps.drain_timeout_s, max_model_len=self.engine.max_model_len,
                       tokenizer=tokenizer, trace_base_dir=self.ctx.scenario_dir, **extra)

    def _step(self, server: RunningServer, scraper: Any, tokenizer: Any, index: int, label: str,
              level: StepLevel, **extra: Any) -> StepProblem | None:
        """Run one step; returns why it could not go on, or None. Raises ArmInterrupted on cancel."""
        from harness.load import run_step

        if self.ctx.cancel.is_set():
            raise ArmInterrupted
        what = "warm-up" if index == WARMUP_STEP else f"step {index} ({label})"
        self.ctx.say(f"[{self.arm.name}] {what}: " + (f"{level.concurrency} users" if level.concurrency
                                                      else f"{level.rate_rps} req/s") +
                     (f" for {level.duration_s:g} s" if level.duration_s else f", {level.requests} requests"))
        scraper.scrape_now(f"step-{index}-start")
        req = self.step_run(server.base_url, tokenizer, index, label, level, **extra)
        outcome = run_step(req, self.ctx.cancel)
        scraper.scrape_now(f"step-{index}-end")
        if self.ctx.cancel.is_set() or outcome.interrupted:
            raise ArmInterrupted
        dead = not server.alive()
        entry = {"arm": self.arm.name, "step": index, "label": label, "concurrency": level.concurrency,
                 "rate_rps": level.rate_rps, "start_ns": outcome.start_ns, "end_ns": outcome.end_ns,
                 "start_wall_ns": outcome.start_wall_ns, "end_wall_ns": outcome.end_wall_ns,
                 "warmup": index == WARMUP_STEP, "requests": outcome.requests, "errors": outcome.errors,
                 "client": outcome.client.model_dump(), "partial": bool(dead or outcome.error),
                 "error": outcome.error, "recorded_at": time.time(), "planned_duration_s": level.duration_s,
                 "ended_early": outcome.ended_early, "stop_reason": outcome.stop_reason, "attempt": req.attempt}
        entry.update({k: v for k, v in extra.items() if k in ("drill", "drill_phase")})
        self.ctx.record_step(entry)
        if outcome.ended_early:
            self.ctx.say(f"[{self.arm.name}] {what} ended early: {outcome.stop_reason}")
        self.ctx.say(f"[{self.arm.name}] {what} done: {outcome.requests} requests, {outcome.errors} errors"
                     + (f" — client saturated: {outcome.client.note}" if outcome.client.saturated else ""))
        if dead:
            how = server.exit_description() or "stopped answering"
            return StepProblem(f"server {how} during {what}", "server")
        if outcome.error:
            return StepProblem(f"{what}: {outcome.error}", "harness" if outcome.harness_failure else "server")
        return None
