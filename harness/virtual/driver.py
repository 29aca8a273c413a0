"""One load step on the virtual clock: the plan's users or arrivals against the in-process engine, as events.

The same plan (:func:`harness.workload.plan.build_request_plan`) and the same rules as the real load generator
(:class:`harness.load.driver.StepDriver`), on virtual time:

* **closed loop**: every user sends its first request at the step's start; each next one is planned when the
  previous one ended plus its think time, and sent if that is before the end of sending; a request-bounded step
  gives user ``u`` its quota of the plan;
* **open loop** (rates, trace timestamps): arrivals at ``start + offset``, until the end of sending (or the plan's
  request count);
* **the end**: sending ends at ``start + duration`` (or earlier, at a sequential look that settles the step);
  requests still running ``drain_timeout_s`` later are cancelled; the step ends when its last request has;
* **client limits**: a request not complete ``request_timeout_s`` after it was sent is a ``timeout``, a stream
  silent for ``stream_idle_timeout_s`` is ``stalled``; either way the engine drops it (the client went away);
* **looks** (``StepRun.looks_s`` / ``on_look``): at their virtual times, after the records so far are flushed to
  their parts (the looker reads the parts);
* **timed actions** (a drill's phase marks): at their virtual times in the step.

A request the server refuses (HTTP 4xx/5xx) ends one :data:`REFUSAL_NS` after it was sent (the round trip of an
error answer; without it a user whose requests are all refused would send endlessly at one instant). A server that
is gone (the engine died) ends the step at once with an error, as the real client's "server unreachable" does.

Records go through :class:`~harness.rundir.parts.PartWriter` (flushed by count, at looks and at the end only: the
parts do not depend on the host's speed). The outcome is the :class:`~harness.load.step.StepOutcome` the real
runner returns; the client's own figures are virtual: no CPU measured, no send lag, first tokens parsed as they
arrive.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from harness.load.health import delay_percentiles, lag_stats_ms
from harness.load.step import StepOutcome, StepRun
from harness.rundir.parts import PartWriter, part_prefix
from harness.rundir.records import ErrorKind
from harness.schema.summary import ClientHealth
from harness.sim.api import ApiError
from harness.virtual.clock import PRIO_CLIENT, PRIO_OBSERVE, EventQueue
from harness.virtual.engine import VirtualEngine
from harness.virtual.exchange import VirtualExchange
from harness.workload.plan import StepPlan, build_request_plan, plan_fingerprint, step_tag
from harness.workload.requests import PlannedRequest

REFUSAL_NS = 1_000_000  # an error answer's round trip (1 ms)
GUARD_S = 60.0  # beyond every limit of a step: a step still running then is stopped with an error
log = logging.getLogger(__name__)
_FINGERPRINTS: dict[str, str] = {}  # plan inputs (JSON) -> plan fingerprint
_FINGERPRINTS_MAX = 256

TimedAction = tuple[float, Callable[[], None]]  # (seconds after the step's start, what to do then)


@dataclass
class _User:
    """A closed-loop user's place in its stream."""

    index: int
    stream: Iterator[PlannedRequest]
    quota: int | None
    sent: int = 0


@dataclass
class _Ending:
    """How the step is ending."""

    deadline_ns: int | None = None  # the end of sending
    drain_ns: int | None = None  # in-flight requests are cancelled then
    stopping: bool = False
    ended_early: bool = False
    interrupted: bool = False
    error: str | None = None
    stop_reason: str | None = None
    end_ns: int | None = None
    lags_ns: list[int] = field(default_factory=list)


class VirtualStepDriver:
    """Runs one :class:`~harness.load.step.StepRun` against a :class:`~harness.virtual.engine.VirtualEngine`."""

    def __init__(self, req: StepRun, engine: VirtualEngine, queue: EventQueue,
                 actions: Sequence[TimedAction] = ()) -> None:
        self.req = req
        self.engine = engine
        self.queue = queue
        self.clock = queue.clock
        self.actions = list(actions)
        self.plan: StepPlan = build_request_plan(
            req.workload, req.level, step_index=req.step_index, calibration=req.tokenizer,
            max_model_len=req.max_model_len, drill=req.drill, drill_phase=req.drill_phase, classes=req.classes,
            duration_override_s=req.duration_override_s, requests_override=req.requests_override,
            base_dir=req.trace_base_dir)
        self.tag = step_tag(req.step_index, req.drill, req.drill_phase)
        self.kind = "completion" if req.workload.api == "completions" else "chat"
        self.end = _Ending()
        self.inflight: set[VirtualExchange] = set()
        self.users_left = 0
        self.requests = 0
        self.first_tokens = 0
        self.waiting: set[int] = set()  # planned sends and arrivals not yet due (their wait numbers)
        self._waits = 0
        self._progress_ns = 0  # the last time a request was sent or ended
        self.errors_by_kind: dict[str, int] = {}
        self.t0_ns = 0
        self.wall0_ns = 0
        self.writer: PartWriter | None = None

    # ------------------------------------------------------------------ the step

    def run(self, cancel: threading.Event | None = None) -> StepOutcome:
        """Run the step to its end on the virtual clock."""
        req, plan = self.req, self.plan
        req.records_dir.mkdir(parents=True, exist_ok=True)
        self.writer = PartWriter(req.records_dir, part_prefix(req.step_index, req.step_label, req.drill,
                                                              req.drill_phase),
                                 flush_every=req.flush_every, flush_interval_s=float("inf"))
        self.t0_ns, self.wall0_ns = self.clock.mono_ns(), self.clock.wall_ns()
        if plan.duration_s is not None:
            self.end.deadline_ns = self.t0_ns + int(plan.duration_s * 1e9)
            self._set_drain(self.end.deadline_ns + int(req.drain_timeout_s * 1e9))
        for at_s in sorted(req.looks_s) if req.on_look is not None else []:
            self.queue.at(self.t0_ns + int(at_s * 1e9), PRIO_OBSERVE, self._look, at_s)
        for at_s, action in sorted(self.actions, key=lambda a: a[0]):
            self.queue.at(self.t0_ns + int(at_s * 1e9), PRIO_OBSERVE, self._timed, action)
        self._progress_ns = self.t0_ns
        self._start_load()

        def finished() -> bool:
            if cancel is not None and cancel.is_set() and not self.end.interrupted:
                self.halt("interrupted", interrupted=True)
            return self.end.end_ns is not None

        while True:
            guard = self._guard_ns()
            if self.queue.run_until(finished, limit_ns=guard):
                break
            if self._guard_ns() > guard:
                continue  # requests went on meanwhile: the guard moved with them
            self.halt("step time limit", error="the step made no progress within its limits (virtual clock)")
            self.queue.run_until(finished, limit_ns=self.clock.mono_ns())
            break
        if self.end.end_ns is None:
            self.end.end_ns = self.clock.mono_ns()
        self.writer.flush()
        return self._outcome()

    def _guard_ns(self) -> int:
        """Beyond every limit: a duration-bounded step has ended by its drain deadline, and every request ends within
        ``request_timeout_s``; a step with nothing sent or ended for longer than that is stopped."""
        req, plan = self.req, self.plan
        span_ns = int((req.drain_timeout_s + req.request_timeout_s + GUARD_S) * 1e9)
        if plan.duration_s is not None:
            return self.t0_ns + int(plan.duration_s * 1e9) + span_ns
        return self._progress_ns + span_ns

    def _start_load(self) -> None:
        plan = self.plan
        if plan.mode == "closed":
            self.users_left = plan.users
            for index in range(plan.users):
                user = _User(index, plan.user_stream(index), plan.user_quota(index))
                self._next_request(user, self.t0_ns)
        else:
            self.users_left = 1
            self._next_arrival(enumerate(plan.arrivals()))
        if self.users_left == 0:
            self._finish()

    def _may_send(self, planned_ns: int) -> bool:
        deadline = self.end.deadline_ns
        return not self.end.stopping and (deadline is None or planned_ns < deadline)

    def _user_done(self) -> None:
        self.users_left -= 1
        if self.users_left <= 0 and not self.inflight:
            self._finish()

    def _finish(self) -> None:
        if self.end.end_ns is None:
            self.end.end_ns = self.clock.mono_ns()

    # ------------------------------------------------------------------ closed loop

    def _next_request(self, user: _User, free_ns: int) -> None:
        """Plan ``user``'s next request (it became free at ``free_ns``), or end the user's share."""
        item = next(user.stream, None) if user.quota is None or user.sent < user.quota else None
        if item is None:
            self._user_done()
            return
        planned = free_ns + (int(item.think_s * 1e9) if user.sent else 0)
        if not self._may_send(planned):
            self._user_done()
            return
        self.queue.at(planned, PRIO_CLIENT, self._send_closed, user, item, planned, self._wait())

    def _wait(self) -> int:
        """A user now waits for a planned send (a halt ends the wait at once)."""
        self._waits += 1
        self.waiting.add(self._waits)
        return self._waits

    def _due(self, wait: int) -> bool:
        """A planned send is due; False when a halt already ended its user's share."""
        if wait not in self.waiting:
            return False
        self.waiting.discard(wait)
        return True

    def _send_closed(self, user: _User, item: PlannedRequest, planned: int, wait: int) -> None:
        if not self._due(wait):
            return
        if self.end.stopping:
            self._user_done()
            return
        user.sent += 1
        self._send(item, user.index, planned, lambda ex: self._next_request(user, ex.end_ns or ex.arrival_ns))

    # ------------------------------------------------------------------ open loop

    def _next_arrival(self, arrivals: Iterator[tuple[int, PlannedRequest]]) -> None:
        limit = self.plan.requests
        nxt = next(arrivals, None)
        if nxt is None or (limit is not None and nxt[0] >= limit):
            self._user_done()
            return
        _n, item = nxt
        planned = self.t0_ns + int((item.offset_s or 0.0) * 1e9)
        if not self._may_send(planned):
            self._user_done()
            return
        self.queue.at(planned, PRIO_CLIENT, self._arrive, arrivals, item, planned, self._wait())

    def _arrive(self, arrivals: Iterator[tuple[int, PlannedRequest]], item: PlannedRequest, planned: int,
                wait: int) -> None:
        if not self._due(wait):
            return
        if self.end.stopping:
            self._user_done()
            return
        self._send(item, item.user, planned, None)
        self._next_arrival(arrivals)

    # ------------------------------------------------------------------ one request

    def _send(self, item: PlannedRequest, user: int, planned: int,
              then: Callable[[VirtualExchange], None] | None) -> None:
        now = self.clock.mono_ns()
        engine = self.engine
        if not engine.alive:
            self.halt("server gone", error=f"server unreachable: the simulated engine is not running "
                      f"({engine.dead or 'stopped'})")
            if then is not None:
                self._user_done()
            return

        def ended(ex: VirtualExchange) -> None:
            self.queue.at(self.clock.mono_ns(), PRIO_CLIENT, self._ended, ex, then)

        ex = VirtualExchange(item, user, planned, now, ended)
        self.inflight.add(ex)
        self._progress_ns = now
        wl = self.req.workload
        body = item.body(self.req.served_model, ignore_eos=wl.ignore_eos, temperature=wl.temperature)
        try:
            ex.req = engine.submit(body, self.kind, ex)
        except ApiError as exc:
            ex.refused(exc, now + REFUSAL_NS)
            self.queue.at(now + REFUSAL_NS, PRIO_CLIENT, self._ended, ex, then)
            return
        ex.http_status = 200
        self.queue.at(now + int(self.req.request_timeout_s * 1e9), PRIO_CLIENT, self._timeout, ex)
        self.queue.at(now + int(self.req.stream_idle_timeout_s * 1e9), PRIO_CLIENT, self._idle_check, ex)

    def _ended(self, ex: VirtualExchange, then: Callable[[VirtualExchange], None] | None) -> None:
        """The client is done with ``ex``: record it, then the user goes on (or the step ends)."""
        if ex not in self.inflight:
            return
        self.inflight.discard(ex)
        self._progress_ns = self.clock.mono_ns()
        self._record(ex)
        if then is not None:
            if ex.error_kind == "cancelled":
                self._user_done()
            else:
                then(ex)
        if self.users_left <= 0 and not self.inflight:
            self._finish()

    def _timeout(self, ex: VirtualExchange) -> None:
        if not ex.done:
            self._client_end(ex, "timeout", f"no complete response within request_timeout_s="
                             f"{self.req.request_timeout_s:g}")

    def _idle_check(self, ex: VirtualExchange) -> None:
        if ex.done:
            return
        idle_ns = int(self.req.stream_idle_timeout_s * 1e9)
        due = ex.last_activity_ns + idle_ns
        if self.clock.mono_ns() < due:
            self.queue.at(due, PRIO_CLIENT, self._idle_check, ex)
            return
        self._client_end(ex, "stalled", f"no data for stream_idle_timeout_s={self.req.stream_idle_timeout_s:g} "
                         "(waiting for stream)")

    def _client_end(self, ex: VirtualExchange, kind: ErrorKind, detail: str) -> None:
        """The client ends a request: the engine drops it (the connection closed)."""
        if ex.req is not None:
            self.engine.abort(ex.req)
        ex.fail(kind, detail, self.clock.mono_ns())

    def _record(self, ex: VirtualExchange) -> None:
        assert self.writer is not None
        rec = ex.record(self.req, self.tag, self.t0_ns, self.wall0_ns)
        self.requests += 1
        self.first_tokens += rec.first_token_ns is not None
        if rec.error_kind is not None:
            self.errors_by_kind[rec.error_kind] = self.errors_by_kind.get(rec.error_kind, 0) + 1
        if rec.error_kind != "cancelled" or rec.first_byte_ns is not None:
            self.end.lags_ns.append(rec.send_ns - rec.planned_send_ns)
        self.writer.add_row(dict(vars(rec)))

    # ------------------------------------------------------------------ ending

    def _set_drain(self, when_ns: int) -> None:
        self.end.drain_ns = when_ns
        self.queue.at(when_ns, PRIO_CLIENT, self._drain, when_ns)

    def _drain(self, when_ns: int) -> None:
        if when_ns != self.end.drain_ns or self.end.end_ns is not None:
            return
        if self.inflight:
            self.halt(f"still running drain_timeout_s={self.req.drain_timeout_s:g} after the step ended")

    def halt(self, reason: str, *, error: str | None = None, interrupted: bool = False) -> None:
        """Stop sending and cancel every request in flight (their records say ``cancelled: reason``)."""
        end = self.end
        end.stopping = True
        end.interrupted = end.interrupted or interrupted
        if error and end.error is None:
            end.error = error
        for ex in sorted(self.inflight, key=lambda e: e.arrival_ns):
            self._client_end(ex, "cancelled", reason)
        waiting, self.waiting = self.waiting, set()
        for _wait in waiting:  # users sleeping until a planned send wake up and stop
            self._user_done()

    def end_sending(self) -> None:
        """End the step's sending now (a sequential look settled it); in-flight requests drain as usual."""
        now = self.clock.mono_ns()
        if self.end.deadline_ns is None or now >= self.end.deadline_ns:
            return
        self.end.ended_early = True
        self.end.deadline_ns = now
        self._set_drain(now + int(self.req.drain_timeout_s * 1e9))

    def _timed(self, action: Callable[[], None]) -> None:
        """A timed action, if the step still runs (one not due by its end is dropped, as the real timer drops it)."""
        if self.end.end_ns is None:
            action()

    def _look(self, at_s: float) -> None:
        req = self.req
        if req.on_look is None or self.end.stop_reason is not None or self.end.stopping or self.end.end_ns:
            return
        assert self.writer is not None
        self.writer.flush()  # the looker reads the step's parts
        try:
            reason = req.on_look(at_s)
        except Exception as exc:  # a look must never break the step: it just does not stop it
            log.warning("%s step %s: sequential look failed: %s", req.arm, req.step_label, exc)
            reason = None
        if reason:
            self.end.stop_reason = reason
            self.end_sending()

    # ------------------------------------------------------------------ the outcome

    def _fingerprint(self) -> str:
        """The plan's fingerprint; a plan is a pure function of its inputs, so every arm's same step shares one."""
        req = self.req
        key = json.dumps([req.workload.model_dump(mode="json"), req.level.model_dump(mode="json"), req.step_index,
                          req.drill, req.drill_phase, req.classes, req.duration_override_s, req.requests_override,
                          req.max_model_len, req.tokenizer.model_dump(mode="json") if req.tokenizer else None,
                          str(req.trace_base_dir)], sort_keys=True)
        found = _FINGERPRINTS.get(key)
        if found is None:
            if len(_FINGERPRINTS) >= _FINGERPRINTS_MAX:
                _FINGERPRINTS.clear()
            found = _FINGERPRINTS[key] = plan_fingerprint(self.plan)
        return found

    def _outcome(self) -> StepOutcome:
        end = self.end
        assert end.end_ns is not None and self.writer is not None
        p50, p99, _ = lag_stats_ms(end.lags_ns)
        health = ClientHealth(cpu_percent=None, send_lag_ms_p50=p50, send_lag_ms_p99=p99, saturated=False,
                              processes=1, machines=1, plan_fingerprint=self._fingerprint())
        delays = [0.0] * self.first_tokens  # first tokens are parsed as they arrive
        return StepOutcome(
            start_ns=self.t0_ns, end_ns=end.end_ns, start_wall_ns=self.wall0_ns,
            end_wall_ns=self.clock.wall_ns(end.end_ns), requests=self.requests,
            errors=sum(self.errors_by_kind.values()), client=health, interrupted=end.interrupted, error=end.error,
            errors_by_kind=dict(self.errors_by_kind), warnings=list(self.plan.warnings),
            parts=list(self.writer.parts), cpu_s=0.0, processes=1, ended_early=end.ended_early,
            stop_reason=end.stop_reason if end.ended_early else None, harness_failure=False,
            first_token_delay_ms=delay_percentiles(delays))
