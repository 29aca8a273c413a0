"""Tier drills on a running arm: load before, a disruption, load during and after; every phase journaled, so the
summary is rebuilt from the files alone.

Every load a drill sends is a journaled step (step index ``-2 - drill number``); ``steps.jsonl`` entries carry
``drill``, ``drill_phase`` (``before``/``during``/``after``, or ``cool`` for the promotion burst's eviction load)
and ``drill_run`` (one id per attempt, so a resumed run reports its latest attempt). ``drill_events.jsonl`` holds
what the drill did (``start``, actions with their clocks, the final ``done``/``error``/``skipped``). Phase spans are
cut by send time; :mod:`harness.decision.drills` computes errors, TTFT p99 and hit sources per phase.

* ``cache_loss`` — one continuous load; ``before_s`` into it the disk tier's contents are deleted (only directories
  the harness created and marked, never the marker); ``during`` runs from the deletion, ``after`` follows.
* ``restart`` — load, then the server is stopped and started again on the same port keeping ``root_dir``; the load
  after it is ``during`` (warm-restart hit rate, time to first disk hit: scrapes every 0.1 s for the first seconds)
  and ``after``.
* ``promotion_burst`` — load; then ``during_s`` of unique prompts (``cool``) push the shared prefixes out of the GPU
  (and, with enough of it, the CPU tier); then ``burst_requests`` requests at once that reuse those now-cold
  prefixes (every reuse family equally likely, so the cold tail is included); then load again.
* ``storage_pressure`` — one continuous load; ``before_s`` into it a filler file (at most ``fill_gib``, never past
  the scenario's disk reserve) is written into the tier's file system and/or disk reads are throttled
  (``read_slowdown``: the simulator's loopback admin endpoint only); both are undone ``during_s`` later, and on any
  exit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from harness.config.drills import Drill
from harness.config.steps import StepLevel
from harness.config.workload import RequestClass, ReuseSpec, TokenRange, WorkloadSpec
from harness.host import disk_tier
from harness.launch.base import LaunchError
from harness.rundir import journal
from harness.rundir.layout import DRILL_STEP_BASE

if TYPE_CHECKING:
    from harness.launch.base import RunningServer
    from harness.run.arm import ArmRunner

FILLER_NAME = "harness-storage-pressure.fill"
WATCH_INTERVAL_S = 0.1
WATCH_MAX_SCRAPES = 100
MAX_BURST_USERS = 1000
PORT_FREE_TIMEOUT_S = 15.0
_CHUNK = 1 << 20
SKIPPED = "skipped"  # what a drill function returns after journaling why it did not run

Action = tuple[float, str, Callable[[], None]]


@dataclasses.dataclass
class _Drill:
    """One drill attempt on one arm."""

    runner: ArmRunner
    scraper: Any
    tokenizer: Any
    drill: Drill
    number: int
    run_id: str = dataclasses.field(default_factory=lambda: secrets.token_hex(4))

    @property
    def server(self) -> RunningServer:
        assert self.runner.server is not None
        return self.runner.server

    @property
    def tiers(self) -> list[Path]:
        return [Path(t.root_dir) for t in self.runner.arm.fs_tiers()]

    def event(self, **fields: Any) -> None:
        journal.append(self.runner.ctx.run.drill_events,
                       {"arm": self.runner.arm.name, "kind": self.drill.kind, "number": self.number,
                        "drill_run": self.run_id, "at_ns": time.perf_counter_ns(), "at_wall_ns": time.time_ns(),
                        **fields})

    def say(self, text: str) -> None:
        self.runner.ctx.say(f"[{self.runner.arm.name}] drill {self.drill.kind}: {text}")


def execute(runner: ArmRunner, server: RunningServer, scraper: Any, tokenizer: Any, drill: Drill) -> None:
    """Run one drill; problems become the drill's journaled result, never an exception (but cancellation)."""
    drills = runner.ctx.scenario.drills
    number = next((i for i, d in enumerate(drills) if d is drill), None)
    d = _Drill(runner, scraper, tokenizer, drill, drills.index(drill) if number is None else number)
    d.event(event="start")
    if runner.server is None or not runner.server.alive():
        d.event(event="error", message="the server is not running (an earlier drill or step ended it)")
        return
    from harness.run.external_arm import skip_reason

    why = skip_reason(runner, drill.kind)  # an external arm without the user's command for this disruption
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


# --- load ----------------------------------------------------------------------------------------------------------

def _load(d: _Drill, names: list[str], seconds: float, *, requests: int | None = None,
          concurrency: int | None = None, workload: WorkloadSpec | None = None, actions: tuple[Action, ...] = (),
          watch: bool = False) -> str | None:
    """One load of the drill as a step, cut at the actions' marks into spans journaled as phases ``names`` (a span
    beyond the last name joins it). Returns a problem, or None."""
    from harness.load import run_step
    from harness.run.arm import ArmInterrupted
    from harness.rundir.parts import read_parts

    runner, ctx = d.runner, d.runner.ctx
    if ctx.cancel.is_set():
        raise ArmInterrupted
    level = StepLevel(concurrency=concurrency or d.drill.concurrency, duration_s=seconds or None, requests=requests)
    index, tag = DRILL_STEP_BASE - d.number, "-".join(names)
    label = f"drill-{d.drill.kind}-{tag}"
    server = d.server
    d.say(f"load ({', '.join(names)}): {level.concurrency} users"
          + (f" for {seconds:g} s" if seconds else f", {requests} requests"))
    d.scraper.scrape_now(f"drill-{d.number}-{tag}-start")
    req = runner.step_run(server.base_url, d.tokenizer, index, label, level, drill=d.drill.kind, drill_phase=tag)
    if workload is not None:
        req = dataclasses.replace(req, workload=workload)
    timer = _Timer(actions, d, watch)
    timer.start()
    try:
        outcome = run_step(req, ctx.cancel)
    finally:
        marks = timer.finish()
    d.scraper.scrape_now(f"drill-{d.number}-{tag}-end")
    if ctx.cancel.is_set() or outcome.interrupted:
        raise ArmInterrupted
    table, _ = read_parts(outcome.parts)
    sends: list[int] = table.column("send_ns").to_pylist() if table.num_rows else []
    failed: list[str | None] = table.column("error_kind").to_pylist() if table.num_rows else []
    edges = [(outcome.start_ns, outcome.start_wall_ns), *marks, (outcome.end_ns, outcome.end_wall_ns)]
    spans = [(edges[i], edges[i + 1]) for i in range(min(len(names), len(edges) - 1))]
    if spans:
        spans[-1] = (spans[-1][0], edges[-1])
    dead = not server.alive()
    for name, ((lo, lo_wall), (hi, hi_wall)) in zip(names, spans, strict=False):
        last = hi == edges[-1][0]
        inside = [k for k, s in enumerate(sends) if lo <= s < hi or (last and s == hi)]
        ctx.record_step({"arm": runner.arm.name, "step": index, "label": label, "concurrency": level.concurrency,
                         "rate_rps": None, "start_ns": lo, "end_ns": hi, "start_wall_ns": lo_wall,
                         "end_wall_ns": hi_wall, "warmup": False, "requests": len(inside),
                         "errors": sum(1 for k in inside if failed[k] is not None),
                         "client": outcome.client.model_dump(), "partial": bool(dead or outcome.error),
                         "error": outcome.error, "recorded_at": time.time(), "drill": d.drill.kind,
                         "drill_phase": name, "drill_run": d.run_id, "drill_number": d.number})
    for problem in timer.problems:
        d.event(event="action_error", message=problem)
    if dead:
        return f"server {server.exit_description() or 'stopped answering'} during the drill's {tag} load"
    if outcome.error:
        return f"{tag} load: {outcome.error}"
    return timer.problems[0] if timer.problems else None


class _Timer:
    """Fires timed actions (seconds after the load starts) in a thread, each after a scrape (so the next phase's
    counters have a base right at its start) and a mark (the phase boundary); optionally
    scrapes every :data:`WATCH_INTERVAL_S` meanwhile (at most :data:`WATCH_MAX_SCRAPES` times)."""

    def __init__(self, actions: tuple[Action, ...], d: _Drill, watch: bool) -> None:
        self.actions = sorted(actions, key=lambda a: a[0])
        self.d = d
        self.watch = watch
        self.marks: list[tuple[int, int]] = []
        self.problems: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="harness-drill", daemon=True)

    def start(self) -> None:
        if self.actions or self.watch:
            self._thread.start()

    def _run(self) -> None:
        t0 = time.monotonic()
        pending = list(self.actions)
        scrapes = 0
        while pending or (self.watch and scrapes < WATCH_MAX_SCRAPES):
            if pending and time.monotonic() - t0 >= pending[0][0]:
                _at, name, fn = pending.pop(0)
                self.d.scraper.scrape_now(f"drill-{self.d.number}-{name}")  # the next span's counter base
                self.marks.append((time.perf_counter_ns(), time.time_ns()))
                try:
                    fn()
                except (OSError, ValueError, httpx.HTTPError) as exc:
                    self.problems.append(f"{name}: {type(exc).__name__}: {exc}")
                continue
            wait = 3600.0
            if self.watch and scrapes < WATCH_MAX_SCRAPES:
                self.d.scraper.scrape_now(f"drill-{self.d.number}-watch")
                scrapes += 1
                wait = WATCH_INTERVAL_S
            if pending:
                wait = min(wait, max(0.0, pending[0][0] - (time.monotonic() - t0)))
            if self._stop.wait(wait):
                return

    def finish(self) -> list[tuple[int, int]]:
        """Stop (actions not yet due are dropped) and return the marks, (perf_counter_ns, time_ns), in order."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=600.0)
        return list(self.marks)


# --- kinds ---------------------------------------------------------------------------------------------------------

def _continuous(d: _Drill, on: Callable[[], None], off: Callable[[], None] | None) -> str | None:
    """One load through before/during/after: ``on`` at ``before_s`` (before the load when 0), ``off`` at
    ``before_s + during_s``."""
    dr = d.drill
    off_fn = off or (lambda: None)
    names = (["before"] if dr.before_s > 0 else []) + ["during"] + (["after"] if dr.after_s > 0 else [])
    total = dr.before_s + dr.during_s + dr.after_s
    if total <= 0:
        on()
        off_fn()
        return None
    actions: list[Action] = [(dr.before_s, "on", on)] if dr.before_s > 0 else []
    if dr.before_s <= 0:
        on()
    if dr.after_s > 0 or off is not None:
        actions.append((dr.before_s + dr.during_s, "off", off_fn))
    return _load(d, names, total, actions=tuple(actions))


def _cache_loss(d: _Drill) -> str | None:
    from harness.run.external_arm import clear_cache, is_external

    if is_external(d.server):  # the user's clear_cache_command empties the tiers of a server the harness does not own
        def clear() -> None:
            result = clear_cache(d.runner)
            d.event(event="action", action="cache_loss", command=True, ok=result.ok, message=result.message,
                    took_s=round(result.seconds, 3))

        return _continuous(d, clear, None)
    tiers = d.tiers
    if not tiers:
        d.event(event="skipped", message="the arm has no disk tier")
        return SKIPPED

    def lose() -> None:
        started = time.perf_counter_ns()
        removed = sum(disk_tier.clear_contents(t) for t in tiers)
        d.event(event="action", action="cache_loss", removed_entries=removed, started_ns=started,
                took_s=round((time.perf_counter_ns() - started) / 1e9, 3))

    return _continuous(d, lose, None)


def _restart(d: _Drill) -> str | None:
    from harness.run.arm import ArmInterrupted

    dr, runner = d.drill, d.runner
    if dr.before_s > 0:
        problem = _load(d, ["before"], dr.before_s)
        if problem:
            return problem
    spec = runner.spec
    assert spec is not None
    from harness.run.external_arm import is_external

    if is_external(d.server):
        return _restart_external(d)
    kept = sum(_count_entries(t) for t in d.tiers)
    stop_ns = time.perf_counter_ns()
    d.server.stop()
    _wait_port_free(spec.host, spec.host_port, PORT_FREE_TIMEOUT_S)
    try:
        runner.launch(keep_disk_tier=True, host_port=spec.host_port)
    except LaunchError as exc:
        if runner.ctx.cancel.is_set():
            raise ArmInterrupted from None
        d.event(event="action", action="restart", ok=False, message=exc.message, log_tail=exc.log_tail[-20:])
        return f"restart failed: {exc.message}"
    ready_ns = time.perf_counter_ns()
    d.scraper.scrape_now(f"drill-{d.number}-ready")
    d.event(event="action", action="restart", ok=True, stop_ns=stop_ns, ready_ns=ready_ns, kept_entries=kept,
            restart_s=round((ready_ns - stop_ns) / 1e9, 3))
    total = dr.during_s + dr.after_s
    if total <= 0:
        return None
    names = [n for n, s in (("during", dr.during_s), ("after", dr.after_s)) if s > 0]
    actions: tuple[Action, ...] = ((dr.during_s, "after", lambda: None),) if len(names) == 2 else ()
    return _load(d, names, total, actions=actions, watch=True)


def _restart_external(d: _Drill) -> str | None:
    """The restart drill on an external arm: the user's restart_command, then readiness, then the load after it."""
    from harness.run.arm import ArmInterrupted
    from harness.run.external_arm import restart

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
    return _load(d, names, dr.during_s + dr.after_s, actions=actions, watch=True)


def _promotion_burst(d: _Drill) -> str | None:
    dr, wl = d.drill, d.runner.ctx.scenario.workload
    if dr.before_s > 0:
        problem = _load(d, ["before"], dr.before_s)
        if problem:
            return problem
    if dr.during_s > 0:
        problem = _load(d, ["cool"], dr.during_s, workload=_cool_workload(wl, d.runner.engine.max_model_len))
        if problem:
            return problem
    users = min(dr.burst_requests, MAX_BURST_USERS)
    d.event(event="action", action="burst", requests=dr.burst_requests, users=users)
    problem = _load(d, ["during"], 0.0, requests=dr.burst_requests, concurrency=users, workload=_burst_workload(wl))
    if problem is None and dr.after_s > 0:
        problem = _load(d, ["after"], dr.after_s)
    return problem


def _storage_pressure(d: _Drill) -> str | None:
    dr = d.drill
    tiers = d.tiers
    if not dr.fill_gib and not dr.read_slowdown:
        d.event(event="skipped", message="give fill_gib and/or read_slowdown to apply storage pressure")
        return SKIPPED
    if dr.fill_gib and not tiers:
        d.event(event="skipped", message="fill_gib needs a disk tier and the arm has none")
        return SKIPPED
    try:
        return _continuous(d, lambda: _pressure_on(d, tiers), lambda: _pressure_off(d, tiers))
    finally:
        _pressure_off(d, tiers, quiet=True)


_KINDS: dict[str, Callable[[_Drill], str | None]] = {
    "cache_loss": _cache_loss, "restart": _restart, "promotion_burst": _promotion_burst,
    "storage_pressure": _storage_pressure,
}


# --- helpers -------------------------------------------------------------------------------------------------------

def _count_entries(path: Path) -> int:
    count = 0
    with contextlib.suppress(OSError):
        for _root, dirs, files in os.walk(path, followlinks=False):
            count += len(files) + len(dirs)
    return count


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


def _admin(server: RunningServer, path: str, body: dict[str, Any]) -> bool:
    try:
        resp = httpx.post(server.base_url + path, json=body, timeout=10.0, trust_env=False)
    except httpx.HTTPError:
        return False
    return resp.status_code == 200


def _pressure_on(d: _Drill, tiers: list[Path]) -> None:
    dr = d.drill
    if dr.read_slowdown:
        ok = _admin(d.server, "/admin/faults", {"disk_read_slowdown": dr.read_slowdown})
        d.event(event="action", action="read_slowdown", factor=dr.read_slowdown, applied=ok,
                note=None if ok else "the engine has no throttle endpoint (only the simulator does)")
    if dr.fill_gib and tiers:
        if disk_tier.ownership(tiers[0]) != "ours":
            raise disk_tier.DiskTierError(f"refusing to write a filler into {tiers[0]}: it is not marked as "
                                          "created by the harness")
        target = tiers[0] / FILLER_NAME
        st = os.statvfs(tiers[0])
        reserve = int(d.runner.ctx.scenario.checks.disk_reserve_gib * (1 << 30))
        want = max(0, min(int(dr.fill_gib * (1 << 30)), st.f_bavail * st.f_frsize - reserve))
        written = _fill(target, want)
        d.event(event="action", action="fill", bytes=written, wanted=int(dr.fill_gib * (1 << 30)), path=str(target),
                free_after=os.statvfs(tiers[0]).f_bavail * st.f_frsize)


def _fill(target: Path, want: int) -> int:
    """Write ``want`` bytes of zeros to a new file (stops early, keeping what it wrote, when the disk fills)."""
    written = 0
    block = b"\0" * _CHUNK
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        while written < want:
            try:
                written += os.write(fd, block[: min(_CHUNK, want - written)])
            except OSError:
                break
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
    return written


def _pressure_off(d: _Drill, tiers: list[Path], *, quiet: bool = False) -> None:
    if d.drill.read_slowdown and d.runner.server is not None and d.runner.server.alive():
        ok = _admin(d.server, "/admin/faults", {"disk_read_slowdown": 1.0})
        if not quiet:
            d.event(event="action", action="read_slowdown_off", applied=ok)
    for tier in tiers:
        filler = tier / FILLER_NAME
        if filler.is_file() and not filler.is_symlink():
            filler.unlink()
            d.event(event="action", action="fill_removed", path=str(filler))


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
