"""One drill attempt on one arm (:class:`DrillAttempt`) and its loads: each load is a journaled step, cut at its timed
actions into phases (:func:`phase_load`; :func:`continuous_load` for one load through before/during/after).

The layout of what a drill journals is described in :mod:`harness.run.drill_actions`.
"""

from __future__ import annotations

import dataclasses
import functools
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from harness.config.drills import Drill
from harness.config.steps import StepLevel
from harness.config.workload import WorkloadSpec
from harness.launch.base import RunningServer
from harness.run.arm_errors import ArmInterrupted
from harness.run.arm_handle import ArmHandle
from harness.rundir import journal
from harness.rundir.entries import DrillEvent, StepEntry
from harness.rundir.layout import DRILL_STEP_BASE

WATCH_INTERVAL_S = 0.1
WATCH_MAX_SCRAPES = 100
SKIPPED = "skipped"  # what a drill function returns after journaling why it did not run

Action = tuple[float, str, Callable[[], None]]
Mark = tuple[tuple[int, int], tuple[int, int] | None]  # (perf_counter_ns, time_ns) when it fired; when it ended
Edge = tuple[int, int]  # (perf_counter_ns, time_ns)


@dataclasses.dataclass
class DrillAttempt:
    """One drill attempt on one arm."""

    runner: ArmHandle
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
        journal.append_drill_event(self.runner.ctx.run, DrillEvent(
            arm=self.runner.arm.name, kind=self.drill.kind, number=self.number, drill_run=self.run_id,
            at_ns=self.runner.backend.clock.mono_ns(), at_wall_ns=self.runner.backend.clock.wall_ns(), **fields))

    def say(self, text: str) -> None:
        self.runner.ctx.say(f"[{self.runner.arm.name}] drill {self.drill.kind}: {text}")


def phase_spans(start: Edge, end: Edge, marks: list[Mark], phases: int) -> list[tuple[Edge, Edge]]:
    """The load ``start``..``end`` cut at the marks into at most ``phases`` spans that run forward (a span beyond the
    last phase joins it). A mark with an end (an action whose own duration belongs to no phase: deleting a disk
    tier) leaves the time between its two readings out of every span; a mark outside the load marks its edge."""
    def inside(edge: Edge) -> Edge:
        return min(max(edge[0], start[0]), end[0]), edge[1]

    spans: list[tuple[Edge, Edge]] = []
    lo = start
    for fired, ended in marks:
        spans.append((lo, inside(fired)))
        lo = inside(ended) if ended is not None else inside(fired)
    spans.append((lo, end))
    if len(spans) > phases:
        spans = [*spans[:phases - 1], (spans[phases - 1][0], end)] if phases > 0 else []
    return spans


def phase_load(d: DrillAttempt, names: list[str], seconds: float, *, requests: int | None = None,
               concurrency: int | None = None, workload: WorkloadSpec | None = None,
               actions: tuple[Action, ...] = (), watch: bool = False,
               apart: frozenset[str] = frozenset()) -> str | None:
    """One load of the drill as a step, cut at the actions' marks into spans journaled as phases ``names`` (a span
    beyond the last name joins it); the time an action named in ``apart`` takes belongs to no phase. Returns a
    problem, or None."""
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
    timer = PhaseTimer(actions, d, watch, apart)
    try:
        outcome = runner.backend.run_step(req, ctx.cancel, timer)  # it starts the timer, or runs its plan()
    finally:
        marks = timer.finish()
    d.scraper.scrape_now(f"drill-{d.number}-{tag}-end")
    if ctx.cancel.is_set() or outcome.interrupted:
        raise ArmInterrupted
    table, _ = read_parts(outcome.parts)
    sends: list[int] = table.column("send_ns").to_pylist() if table.num_rows else []
    failed: list[str | None] = table.column("error_kind").to_pylist() if table.num_rows else []
    spans = phase_spans((outcome.start_ns, outcome.start_wall_ns), (outcome.end_ns, outcome.end_wall_ns), marks,
                        len(names))
    dead = not server.alive()
    for name, ((lo, lo_wall), (hi, hi_wall)) in zip(names, spans, strict=False):
        last = hi == outcome.end_ns
        inside = [k for k, s in enumerate(sends) if lo <= s < hi or (last and s == hi)]
        ctx.record_step(StepEntry(arm=runner.arm.name, step=index, label=label, concurrency=level.concurrency,
                                  rate_rps=None, start_ns=lo, end_ns=hi, start_wall_ns=lo_wall, end_wall_ns=hi_wall,
                                  warmup=False, requests=len(inside),
                                  errors=sum(1 for k in inside if failed[k] is not None), client=outcome.client,
                                  partial=bool(dead or outcome.error), error=outcome.error, recorded_at=time.time(),
                                  drill=d.drill.kind, drill_phase=name, drill_run=d.run_id, drill_number=d.number))
    for problem in timer.problems:
        d.event(event="action_error", message=problem)
    if dead:
        return f"server {server.exit_description() or 'stopped answering'} during the drill's {tag} load"
    if outcome.error:
        return f"{tag} load: {outcome.error}"
    return timer.problems[0] if timer.problems else None


class PhaseTimer:
    """Fires timed actions (seconds after the load starts) in a thread, each after a scrape (so the next phase's
    counters have a base right at its start) and a mark (the phase boundary; for an action in ``apart``, a second
    scrape and reading when it ends, so its own duration belongs to no phase); optionally
    scrapes every :data:`WATCH_INTERVAL_S` meanwhile (at most :data:`WATCH_MAX_SCRAPES` times). On a virtual clock
    the backend runs the same work (:meth:`plan`) at its virtual times instead of :meth:`start`."""

    def __init__(self, actions: tuple[Action, ...], d: DrillAttempt, watch: bool,
                 apart: frozenset[str] = frozenset()) -> None:
        self.actions = sorted(actions, key=lambda a: a[0])
        self.apart = apart
        self.d = d
        self.clock = d.runner.backend.clock
        self.watch = watch
        self.marks: list[Mark] = []
        self.problems: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="harness-drill", daemon=True)

    def start(self) -> None:
        if self.actions or self.watch:
            self._thread.start()

    def plan(self) -> list[tuple[float, Callable[[], None]]]:
        """The timer's work as (seconds after the load starts, what to do), actions before watch scrapes due at the
        same time: what a virtual clock runs instead of :meth:`start`."""
        work: list[tuple[float, Callable[[], None]]] = [(a[0], functools.partial(self._fire, a))
                                                        for a in self.actions]
        if self.watch:
            work += [(k * WATCH_INTERVAL_S, self._watch_scrape) for k in range(WATCH_MAX_SCRAPES)]
        return work

    def _fire(self, action: Action) -> None:
        _at, name, fn = action
        self.d.scraper.scrape_now(f"drill-{self.d.number}-{name}")  # the next span's counter base
        fired = (self.clock.mono_ns(), self.clock.wall_ns())
        try:
            fn()
        except (OSError, ValueError, httpx.HTTPError) as exc:
            self.problems.append(f"{name}: {type(exc).__name__}: {exc}")
        ended = None
        if name in self.apart:
            self.d.scraper.scrape_now(f"drill-{self.d.number}-{name}-end")  # the base after the action
            ended = (self.clock.mono_ns(), self.clock.wall_ns())
        self.marks.append((fired, ended))

    def _watch_scrape(self) -> None:
        self.d.scraper.scrape_now(f"drill-{self.d.number}-watch")

    def _run(self) -> None:
        t0 = time.monotonic()
        pending = list(self.actions)
        scrapes = 0
        while pending or (self.watch and scrapes < WATCH_MAX_SCRAPES):
            if pending and time.monotonic() - t0 >= pending[0][0]:
                self._fire(pending.pop(0))
                continue
            wait = 3600.0
            if self.watch and scrapes < WATCH_MAX_SCRAPES:
                self._watch_scrape()
                scrapes += 1
                wait = WATCH_INTERVAL_S
            if pending:
                wait = min(wait, max(0.0, pending[0][0] - (time.monotonic() - t0)))
            if self._stop.wait(wait):
                return

    def finish(self) -> list[Mark]:
        """Stop (actions not yet due are dropped) and return the marks in order."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=600.0)
        return list(self.marks)


def continuous_load(d: DrillAttempt, on: Callable[[], None], off: Callable[[], None] | None, *,
                    on_apart: bool = False) -> str | None:
    """One load through before/during/after: ``on`` at ``before_s`` (before the load when 0), ``off`` at
    ``before_s + during_s``; with ``on_apart`` the during phase starts when ``on`` has finished."""
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
    return phase_load(d, names, total, actions=tuple(actions), apart=frozenset({"on"} if on_apart else ()))
