"""Run one arm: fresh server -> readiness -> warm-up -> steps with load and scraping -> (drills) -> stop.

Whatever happens (start-up error, death mid-step, Ctrl-C), the server is stopped and removed, the scraper is
stopped, and every completed request record stays on disk. An arm that fails is journaled with the engine's last
log lines and a cause (``server``, or ``harness`` for the harness's own failures, which ``--resume`` redoes; see
:mod:`harness.rundir.resume`); the caller decides whether the run goes on. Every start of a step is journaled
as an attempt, whose number goes into the step's records and its journal entry (:mod:`harness.rundir.attempts`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.config.arms import Arm
from harness.config.steps import StepLevel
from harness.decision.cold_start import CALIBRATION_EVENT
from harness.engines.spec import LaunchSpec
from harness.launch.base import LaunchError, RunningServer
from harness.plan.load_layout import LoadLayout
from harness.run.arm_errors import ArmInterrupted, StepProblem
from harness.run.backend import ArmBackend, RealBackend
from harness.run.backend_api import Sampling, StepScraper
from harness.run.capacity import run_search
from harness.run.context import RunContext
from harness.run.drills import run_drills
from harness.run.external_arm import attach, wait_attached_ready
from harness.run.live_guard import verify
from harness.run.sim_lag import lag_during
from harness.rundir import journal
from harness.rundir.entries import StepEntry
from harness.rundir.records import WARMUP_STEP
from harness.rundir.resume import ATTEMPT_EVENT, Cause, next_attempt

if TYPE_CHECKING:
    from harness.load.step import StepRun

FORCED_STOP_S = 3.0  # a forced stop (second Ctrl-C) waits at most this long for the server to go


@dataclass
class ArmResult:
    """How the arm ended."""

    arm: str
    status: str  # completed | failed | interrupted
    steps_done: int
    failure: dict[str, Any] | None = None
    cause: Cause = "server"  # of a failure: the server's, or the harness's own (redone by --resume)


def _failure(phase: str, message: str, log_tail: list[str]) -> dict[str, Any]:
    return {"phase": phase, "message": message, "log_tail": log_tail[-40:]}


def _level_for_warmup(ctx: RunContext) -> StepLevel | None:
    w = ctx.scenario.steps.warmup
    if w.duration_s <= 0 and w.requests <= 0:
        return None
    return StepLevel(concurrency=w.concurrency, duration_s=w.duration_s or None, requests=w.requests or None)


class ArmRunner:
    """Runs one arm within a run, on the clock of its ``backend`` (:mod:`harness.run.backend`; default: real)."""

    def __init__(self, ctx: RunContext, arm: Arm, start_step: int = 0, backend: ArmBackend | None = None) -> None:
        self.ctx = ctx
        self.arm = arm
        self.start_step = start_step
        self.backend: ArmBackend = backend if backend is not None else RealBackend()
        self.engine = ctx.scenario.engine_for(arm)
        self.server: RunningServer | None = None
        self.spec: LaunchSpec | None = None
        self.load = LoadLayout(ctx.scenario.load)  # this arm's load processes (processes: auto grows them)

    def launch(self, *, keep_disk_tier: bool = False, host_port: int | None = None) -> RunningServer:
        """Start a fresh server (or attach to an external one) and wait until it is ready; raises LaunchError.
        A restart drill keeps the disk tier (``keep_disk_tier``); see :mod:`harness.run.arm_server`. The spec and the
        server are kept as soon as they exist, so a failure or a forced stop during the wait still stops it."""
        if self.arm.server is not None:  # an existing deployment (engine.launcher: external): attach, start nothing
            spec, server = attach(self)
            self.spec, self.server = spec, server
            wait_attached_ready(self, spec, server)
            return server
        fresh = self.backend.start(self, keep_disk_tier=keep_disk_tier, host_port=host_port)
        self.spec, self.server = fresh.spec, fresh.server
        self.backend.wait_ready(self, fresh)
        return fresh.server

    def run(self) -> ArmResult:
        """The whole arm; never raises for server problems (they become a failed result)."""
        steps_done = self.start_step
        scraper: StepScraper | None = None
        host: Sampling | None = None
        try:
            try:
                server = self.launch()
            except LaunchError as exc:
                if self.ctx.cancel.is_set():
                    raise ArmInterrupted from None
                return self._fail(exc.phase, exc.message, exc.log_tail, steps_done)
            assert self.spec is not None
            if self.arm.server is not None:  # the one-dimension guard on a live server, before any step
                refused = verify(self, server)
                if refused is not None:
                    return self._fail("live-config", refused, [], steps_done)
            scraper = self.backend.scraper(self, server)
            scraper.start()
            host = self.backend.host_sampler(self)
            host.start()
            self.backend.prove_cold(self, server)  # proof of state, before any request that could fill a cache
            tokenizer = self.backend.calibrate(self, server)
            self.ctx.record_arm(self.arm.name, CALIBRATION_EVENT, calibration=tokenizer.model_dump(mode="json"))
            warm = _level_for_warmup(self.ctx)
            if warm is not None:
                outcome = self.run_journaled_step(server, scraper, tokenizer, WARMUP_STEP, "warmup", warm)
                if outcome is not None:
                    return self._fail("step", outcome.message, self._tail(), steps_done, outcome.cause)
            levels = self.ctx.scenario.steps.levels
            for index in range(self.start_step, len(levels)):
                problem = self.run_journaled_step(server, scraper, tokenizer, index, levels[index].label,
                                                  levels[index], **self._sequential(index, levels[index]))
                if problem is not None:
                    return self._fail("step", problem.message, self._tail(), steps_done, problem.cause)
                steps_done = index + 1
            problem = self._capacity_search(server, scraper, tokenizer)
            if problem is not None:
                return self._fail("step", problem.message, self._tail(), steps_done, problem.cause)
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
                    self.ctx.say(f"[{self.arm.name}] " + ("external server left running (not the harness's to stop)"
                                                          if self.arm.server is not None else "server stopped"))

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
        if server is None or self.arm.server is not None:  # nothing started: an external server is left running
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
        from harness.decision.sequential import StepLooker
        from harness.rundir.parts import part_prefix

        looker = StepLooker(scenario, self.ctx.run, self.arm, names.index(self.arm.name), index,
                            part_prefix(index, level.label), level, attempt=self._attempt(index, level.label))
        looker.started_ns = self.backend.clock.mono_ns()  # the step's records are stamped on the backend's clock
        looks = looker.looks_s()
        return {"looks_s": looks, "on_look": looker} if looks else {}

    def _capacity_search(self, server: RunningServer, scraper: Any, tokenizer: Any) -> StepProblem | None:
        """``steps.search``: probes on this server after the fixed steps, before drills (cache loss and restarts
        would change the state the probes measure); see :mod:`harness.run.capacity`."""
        if self.ctx.scenario.steps.search is None:
            return None
        return run_search(self, server, scraper, tokenizer)

    def _after_steps(self, server: RunningServer, scraper: Any, tokenizer: Any) -> None:
        """Hook for drills (see :mod:`harness.run.drills`)."""
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
        """The number the next try of this step will have (see :mod:`harness.rundir.attempts`)."""
        from harness.rundir.parts import find_parts, part_prefix

        earlier = bool(find_parts(self.ctx.run.records_dir(self.arm.name), part_prefix(index, label, drill,
                                                                                         drill_phase)))
        events = journal.read_arm_events(self.ctx.run, strict=False)
        return next_attempt(events, self.arm.name, index, earlier_records=earlier)

    def step_run(self, base_url: str, tokenizer: Any, index: int, label: str, level: StepLevel,
                 **extra: Any) -> StepRun:
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
                       tokenizer=tokenizer, trace_base_dir=self.ctx.scenario_dir, **self.load.step_fields(),
                       **extra)

    def run_journaled_step(self, server: RunningServer, scraper: Any, tokenizer: Any, index: int, label: str,
                           level: StepLevel, journal_extra: dict[str, Any] | None = None,
                           **extra: Any) -> StepProblem | None:
        """Run one step and journal it; returns why it could not go on, or None. Raises ArmInterrupted on cancel.
        ``journal_extra`` goes into the step's journal entry (a capacity probe's ``search`` object)."""
        if self.ctx.cancel.is_set():
            raise ArmInterrupted
        what = "warm-up" if index == WARMUP_STEP else (f"capacity probe {label}" if journal_extra
                                                       else f"step {index} ({label})")
        self.ctx.say(f"[{self.arm.name}] {what}: " + (f"{level.concurrency} users" if level.concurrency
                                                      else f"{level.rate_rps} req/s") +
                     (f" for {level.duration_s:g} s" if level.duration_s else f", {level.requests} requests"))
        scraper.scrape_now(f"step-{index}-start")
        req = self.step_run(server.base_url, tokenizer, index, label, level, **extra)
        behind_before = self.backend.behind_s(server, self.spec)
        outcome = self.backend.run_step(req, self.ctx.cancel)
        scraper.scrape_now(f"step-{index}-end")
        behind = lag_during(behind_before, self.backend.behind_s(server, self.spec))
        if self.ctx.cancel.is_set() or outcome.interrupted:
            raise ArmInterrupted
        dead = not server.alive()
        self.ctx.record_step(StepEntry(
            arm=self.arm.name, step=index, label=label, concurrency=level.concurrency, rate_rps=level.rate_rps,
            start_ns=outcome.start_ns, end_ns=outcome.end_ns, start_wall_ns=outcome.start_wall_ns,
            end_wall_ns=outcome.end_wall_ns, warmup=index == WARMUP_STEP, requests=outcome.requests,
            errors=outcome.errors, client=self.load.after_step(outcome.client, what),
            partial=bool(dead or outcome.error), error=outcome.error, recorded_at=time.time(),
            planned_duration_s=level.duration_s,
            ended_early=outcome.ended_early, stop_reason=outcome.stop_reason, attempt=req.attempt,
            sim_behind_s=behind,
            **{k: v for k, v in extra.items() if k in ("drill", "drill_phase")}, **(journal_extra or {})))
        if outcome.ended_early:
            self.ctx.say(f"[{self.arm.name}] {what} ended early: {outcome.stop_reason}")
        spread = outcome.client.processes > 1 or outcome.client.remote_processes > 0
        self.ctx.say(f"[{self.arm.name}] {what} done: {outcome.requests} requests, {outcome.errors} errors"
                     + (f" from {outcome.client.processes} load processes on {outcome.client.machines} machine(s)"
                        if spread else "")
                     + (f" — client saturated: {outcome.client.note}" if outcome.client.saturated else ""))
        if self.load.change:
            self.ctx.say(f"[{self.arm.name}] {self.load.change}")
        if dead:
            how = server.exit_description() or "stopped answering"
            return StepProblem(f"server {how} during {what}", "server")
        if outcome.error:
            return StepProblem(f"{what}: {outcome.error}", "harness" if outcome.harness_failure else "server")
        return None
