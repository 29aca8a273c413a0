"""Tier drills on a running arm: load before, a disruption, load during and after; every phase journaled, so the
summary is rebuilt from the files alone.

Every load a drill sends is a journaled step (step index ``-2 - drill number``); ``steps.jsonl`` entries carry
``drill``, ``drill_phase`` (``before``/``during``/``after``, or ``cool`` for the promotion burst's eviction load)
and ``drill_run`` (one id per attempt, so a resumed run reports its latest attempt). ``drill_events.jsonl`` holds
what the drill did (``start``, actions with their clocks, the final ``done``/``error``/``skipped``). Phase spans are
cut by send time; :mod:`harness.decision.drills` computes errors, TTFT p99 and hit sources per phase.

* ``cache_loss`` — one continuous load; ``before_s`` into it the disk tier's contents are deleted (only directories
  the harness created and marked, never the marker), or the user's ``clear_cache_command`` runs; ``during`` runs
  from when that finished (the deletion's own seconds belong to no phase: on a large tier they can be most of
  ``during_s``, and a real loss is instant), ``after`` follows.
* ``restart`` — load, then the server is stopped and started again on the same port keeping ``root_dir``; the load
  after it is ``during`` (warm-restart hit rate, time to first disk hit: scrapes every 0.1 s for the first seconds)
  and ``after``.
* ``promotion_burst`` — load; then ``during_s`` of unique prompts (``cool``) push the shared prefixes out of the GPU
  (and, with enough of it, the CPU tier); then ``burst_requests`` requests at once that reuse those now-cold
  prefixes (every reuse family equally likely, so the cold tail is included); then load again.
* ``storage_pressure`` — one continuous load; ``before_s`` into it a filler file (at most ``fill_gib``, never past
  the scenario's disk reserve) is written into the tier's file system and/or disk reads are throttled
  (``read_slowdown``: the simulator's loopback admin endpoint only); both are undone ``during_s`` later, and on any
  exit (:mod:`harness.run.storage_pressure`).

Each drill's loads and their phases are cut by :mod:`harness.run.drill_load`.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

from harness.config.drills import Drill
from harness.config.workload import RequestClass, ReuseSpec, TokenRange, WorkloadSpec
from harness.host import disk_tier
from harness.launch.base import LaunchError, RunningServer
from harness.run.arm_errors import ArmInterrupted
from harness.run.arm_handle import ArmHandle
from harness.run.drill_load import SKIPPED, Action, DrillAttempt, continuous_load, phase_load
from harness.run.external_arm import clear_cache, is_external, restart, skip_reason
from harness.run.storage_pressure import storage_pressure

MAX_BURST_USERS = 1000
PORT_FREE_TIMEOUT_S = 15.0


def execute(runner: ArmHandle, server: RunningServer, scraper: Any, tokenizer: Any, drill: Drill) -> None:
    """Run one drill; problems become the drill's journaled result, never an exception (but cancellation)."""
    drills = runner.ctx.scenario.drills
    number = next((i for i, d in enumerate(drills) if d is drill), None)
    d = DrillAttempt(runner, scraper, tokenizer, drill, drills.index(drill) if number is None else number)
    d.event(event="start")
    if runner.server is None or not runner.server.alive():
        d.event(event="error", message="the server is not running (an earlier drill or step ended it)")
        return
    # an external arm without the user's command for this disruption, or a drill the backend's clock cannot give
    why = skip_reason(runner, drill.kind) or runner.backend.drill_skip(drill.kind)
    if why is not None:
        d.event(event="skipped", message=why)
        d.say(f"skipped: {why}")
        return
    try:
        problem = _KINDS[drill.kind](d)
    except (OSError, disk_tier.DiskTierError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    if problem == SKIPPED:
        return
    d.event(event="error" if problem else "done", message=problem or "")
    d.say("error: " + problem if problem else "done")


# --- kinds ---------------------------------------------------------------------------------------------------------

def _cache_loss(d: DrillAttempt) -> str | None:
    if is_external(d.server):  # the user's clear_cache_command empties the tiers of a server the harness does not own
        def clear() -> None:
            result = clear_cache(d.runner)
            d.event(event="action", action="cache_loss", command=True, ok=result.ok, message=result.message,
                    took_s=round(result.seconds, 3))

        return continuous_load(d, clear, None, on_apart=True)
    tiers = d.tiers
    if not tiers:
        d.event(event="skipped", message="the arm has no disk tier")
        return SKIPPED

    clock = d.runner.backend.clock

    def lose() -> None:
        started = clock.mono_ns()
        removed = d.runner.backend.clear_disk_tiers(tiers)
        d.event(event="action", action="cache_loss", removed_entries=removed, started_ns=started,
                took_s=round((clock.mono_ns() - started) / 1e9, 3))

    return continuous_load(d, lose, None, on_apart=True)


def _restart(d: DrillAttempt) -> str | None:
    dr, runner = d.drill, d.runner
    if dr.before_s > 0:
        problem = phase_load(d, ["before"], dr.before_s)
        if problem:
            return problem
    spec = runner.spec
    assert spec is not None
    if is_external(d.server):
        return _restart_external(d)
    clock = runner.backend.clock
    kept = runner.backend.count_disk_entries(d.tiers)
    stop_ns = clock.mono_ns()
    d.server.stop()
    _wait_port_free(spec.host, spec.host_port, PORT_FREE_TIMEOUT_S)
    try:
        runner.launch(keep_disk_tier=True, host_port=spec.host_port)
    except LaunchError as exc:
        if runner.ctx.cancel.is_set():
            raise ArmInterrupted from None
        d.event(event="action", action="restart", ok=False, message=exc.message, log_tail=exc.log_tail[-20:])
        return f"restart failed: {exc.message}"
    ready_ns = clock.mono_ns()
    d.scraper.scrape_now(f"drill-{d.number}-ready")
    d.event(event="action", action="restart", ok=True, stop_ns=stop_ns, ready_ns=ready_ns, kept_entries=kept,
            restart_s=round((ready_ns - stop_ns) / 1e9, 3))
    total = dr.during_s + dr.after_s
    if total <= 0:
        return None
    names = [n for n, s in (("during", dr.during_s), ("after", dr.after_s)) if s > 0]
    actions: tuple[Action, ...] = ((dr.during_s, "after", lambda: None),) if len(names) == 2 else ()
    return phase_load(d, names, total, actions=actions, watch=True)


def _restart_external(d: DrillAttempt) -> str | None:
    """The restart drill on an external arm: the user's restart_command, then readiness, then the load after it."""
    dr = d.drill
    stop_ns = time.perf_counter_ns()
    try:
        result = restart(d.runner)
    except LaunchError as exc:
        if d.runner.ctx.cancel.is_set():
            raise ArmInterrupted from None
        d.event(event="action", action="restart", ok=False, message=exc.message, log_tail=exc.log_tail[-20:])
        return f"not ready after restart_command: {exc.message}"
    if not result.ok:
        if d.runner.ctx.cancel.is_set():
            raise ArmInterrupted
        d.event(event="action", action="restart", ok=False, message=result.message)
        return f"restart failed: {result.message}"
    ready_ns = time.perf_counter_ns()
    d.scraper.scrape_now(f"drill-{d.number}-ready")
    d.event(event="action", action="restart", ok=True, stop_ns=stop_ns, ready_ns=ready_ns, command=True,
            restart_s=round((ready_ns - stop_ns) / 1e9, 3))
    names = [n for n, s in (("during", dr.during_s), ("after", dr.after_s)) if s > 0]
    if not names:
        return None
    actions: tuple[Action, ...] = ((dr.during_s, "after", lambda: None),) if len(names) == 2 else ()
    return phase_load(d, names, dr.during_s + dr.after_s, actions=actions, watch=True)


def _promotion_burst(d: DrillAttempt) -> str | None:
    dr, wl = d.drill, d.runner.ctx.scenario.workload
    if dr.before_s > 0:
        problem = phase_load(d, ["before"], dr.before_s)
        if problem:
            return problem
    if dr.during_s > 0:
        problem = phase_load(d, ["cool"], dr.during_s, workload=_cool_workload(wl, d.runner.engine.max_model_len))
        if problem:
            return problem
    users = min(dr.burst_requests, MAX_BURST_USERS)
    d.event(event="action", action="burst", requests=dr.burst_requests, users=users)
    problem = phase_load(d, ["during"], 0.0, requests=dr.burst_requests, concurrency=users,
                         workload=_burst_workload(wl))
    if problem is None and dr.after_s > 0:
        problem = phase_load(d, ["after"], dr.after_s)
    return problem


_KINDS: dict[str, Callable[[DrillAttempt], str | None]] = {
    "cache_loss": _cache_loss, "restart": _restart, "promotion_burst": _promotion_burst,
    "storage_pressure": storage_pressure,
}


# --- helpers -------------------------------------------------------------------------------------------------------

def _wait_port_free(host: str, port: int, timeout_s: float) -> bool:
    """Wait (bounded) until nothing listens on the port; binds the way servers do (``SO_REUSEADDR``), so
    connections in TIME_WAIT do not count as busy."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    bind_host = "::1" if family == socket.AF_INET6 else "127.0.0.1"
    deadline = time.monotonic() + timeout_s
    while True:
        with socket.socket(family) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((bind_host, port))
                return True
            except OSError:
                if time.monotonic() >= deadline:
                    return False
        time.sleep(0.1)


def _cool_workload(wl: WorkloadSpec, max_model_len: int | None) -> WorkloadSpec:
    """Unique prompts only (nothing shared), as long as the workload's, with one or two output tokens."""
    if wl.classes:
        lo, hi = min(c.prompt_tokens.min for c in wl.classes), max(c.prompt_tokens.max for c in wl.classes)
    else:
        lo, hi = 1024, 2048
    cap = max(16, (max_model_len or hi + 8) - 8)
    lo, hi = min(lo, cap), min(hi, cap)
    cls = RequestClass(name="drill-cool", weight=1.0, prompt_tokens=TokenRange(min=lo, max=hi),
                       output_tokens=TokenRange(min=1, max=2), reuse="unique")
    return WorkloadSpec(seed=wl.seed, api=wl.api, classes=[cls], reuse=ReuseSpec(system_prompts=None),
                        ignore_eos=True, temperature=wl.temperature, hash_block_tokens=wl.hash_block_tokens)


def _burst_workload(wl: WorkloadSpec) -> WorkloadSpec:
    """The workload with every reuse family equally likely (so cold ones come up) and no unique-only requests;
    a trace replays the same blocks as the arm's steps."""
    if wl.trace is not None:
        return wl.model_copy(update={"trace": wl.trace.model_copy(update={"share_across_steps": True})})
    reuse = wl.reuse
    flat: dict[str, Any] = {"unique_fraction": 0.0}
    for name in ("system_prompts", "documents", "rag"):
        part = getattr(reuse, name)
        if part is not None:
            flat[name] = part.model_copy(update={"zipf_s": 0.0})
    classes = [c for c in wl.classes if c.reuse != "unique"] or list(wl.classes)
    return wl.model_copy(update={"reuse": reuse.model_copy(update=flat), "classes": classes})
