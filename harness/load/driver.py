"""The step driver: runs planned requests on gevent greenlets, times them and turns them into records.

Runs inside the locust process (gevent-patched). Locust owns the users (spawning, distribution over
processes and machines); each user calls :meth:`StepDriver.closed_user`, or one dispatcher user per process
calls :meth:`StepDriver.open_dispatch`. The driver owns the timing: the step clock ``t0``, the end of sending
(``t0 + duration``), the drain limit (in-flight requests still running ``drain_timeout_s`` later are
cancelled), and the early stop when the server is unreachable or the step is interrupted.

Send lag: a closed-loop request is planned at the moment its user became free (previous end + think time;
``t0`` for the first); an open-loop one at ``t0 + offset``. ``send_ns - planned_send_ns`` is the client's own
lag, reported per step.

Nothing the driver does for itself may hold the loop while bytes wait to be read: the objects alive when the step
starts are frozen out of the garbage collector (``gc.freeze``: a full collection of a warm runner's heap took
~40 ms in the middle of a paced step; collections during the step scan only what the step made), and the
bookkeeping that can wait (turning an exchange into a record, drawing a user's next request) waits until the event
loop is idle (``gevent.idle``, at most :data:`IDLE_WAIT_S`), after the reads that were ready.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import gevent
import gevent.event
import gevent.pool

from harness.load.client import Exchange, Interrupted, StreamClient, Timeouts, make_client
from harness.load.spec import StepSpec
from harness.rundir.records import RequestRecord
from harness.workload.plan import StepPlan, step_tag
from harness.workload.requests import PlannedRequest
from harness.workload.tokens import server_root

DEAD_MIN_ERRORS = 5
DEAD_MIN_SECONDS = 2.0
OPEN_LOOP_CONNECTIONS = 4096
IDLE_WAIT_S = 0.01  # the longest a record or a next request waits for an idle loop

Sink = Callable[[dict[str, Any]], None]


def _when_idle(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` once the event loop has nothing more urgent to do (no socket ready, no timer due), or after
    :data:`IDLE_WAIT_S` at most: a client that is never idle (saturated) still plans and records."""
    with gevent.Timeout(IDLE_WAIT_S, False):
        gevent.idle()
    return fn(*args)


class StepDriver:
    """One process's share of a step."""

    def __init__(self, spec: StepSpec, plan: StepPlan, sink: Sink, *, rank: int = 0, nprocs: int = 1,
                 users_here: int | None = None) -> None:
        self.spec = spec
        self.plan = plan
        self.sink = sink
        self.rank = rank
        self.nprocs = nprocs
        self.tag = step_tag(spec.step_index, spec.drill, spec.drill_phase)
        self.root = server_root(spec.base_url)
        self.path = "/v1/completions" if spec.workload.api == "completions" else "/v1/chat/completions"
        self.timeouts = Timeouts(request_s=spec.request_timeout_s, idle_s=spec.stream_idle_timeout_s)
        self.expected_users = users_here if users_here is not None else (plan.users if plan.mode == "closed"
                                                                         else 1)
        self.t0_ns: int | None = None
        self.wall0_ns = 0
        self.deadline_ns: int | None = None
        self.drain_deadline_ns: int | None = None
        self.end_ns: int | None = None
        self.cpu0 = 0.0
        self.cpu_s = 0.0
        self.stopping = False
        self.halted_ns: int | None = None
        self.ended_early = False
        self.interrupted = False
        self.error: str | None = None
        self.finished = gevent.event.Event()
        self._wake = gevent.event.Event()
        self._inflight: set[Any] = set()  # greenlets with a request in flight
        self._done_users = 0
        self.requests = 0
        self.errors_by_kind: Counter[str] = Counter()
        self.lags_ns: list[int] = []
        self._conn_streak = 0
        self._last_ok_ns = 0
        self._watchdog: gevent.Greenlet[Any, Any] | None = None
        self._streams: dict[int, Iterator[PlannedRequest]] = {}
        self._recorders = gevent.pool.Group()

    # --- clock and stopping ------------------------------------------------------------------------------
    def begin(self) -> None:
        """Start the step clock (idempotent: the first user to arrive starts it)."""
        if self.t0_ns is not None:
            return
        gc.freeze()  # the runner's heap so far is never scanned during the step (see the module docstring)
        self.t0_ns = time.perf_counter_ns()
        self.wall0_ns = time.time_ns()
        self.cpu0 = time.process_time()
        self._last_ok_ns = self.t0_ns
        duration = self.plan.duration_s
        if duration is not None:
            self.deadline_ns = self.t0_ns + int(duration * 1e9)
            self.drain_deadline_ns = self.deadline_ns + int(self.spec.drain_timeout_s * 1e9)
            self._watchdog = gevent.spawn(self._watch)
        if self.expected_users == 0:
            self._finish()

    def _watch(self) -> None:
        assert self.drain_deadline_ns is not None
        poll = 0.2 if self.spec.stop_path else 1.0
        while not self.finished.is_set():
            if self.spec.stop_path and not self.ended_early and os.path.exists(self.spec.stop_path):
                self.end_sending()
            left = (self.drain_deadline_ns - time.perf_counter_ns()) / 1e9
            if left <= 0:
                self.halt(f"still running drain_timeout_s={self.spec.drain_timeout_s:g} after the step ended")
                return
            self.finished.wait(min(left, poll))

    def end_sending(self) -> None:
        """End the step's sending now, as if its duration had just run out (in-flight requests finish and drain
        as usual): a sequential step whose decision is settled."""
        now = time.perf_counter_ns()
        if self.deadline_ns is None or now >= self.deadline_ns:
            return
        self.ended_early = True
        self.deadline_ns = now
        self.drain_deadline_ns = now + int(self.spec.drain_timeout_s * 1e9)

    def halt(self, reason: str, *, error: str | None = None, interrupted: bool = False) -> None:
        """Stop sending and cancel every in-flight request (their records say ``cancelled: reason``)."""
        if self.halted_ns is None:
            self.halted_ns = time.perf_counter_ns()
        self.stopping = True
        self.interrupted = self.interrupted or interrupted
        if error and self.error is None:
            self.error = error
        self._wake.set()
        for g in list(self._inflight):
            if g is gevent.getcurrent() or g.dead:
                continue
            if isinstance(g, gevent.Greenlet):
                g.kill(Interrupted(reason), block=False)
            else:
                gevent.kill(g, Interrupted(reason))

    def wait_finished(self, limit_s: float | None, grace_s: float = 10.0) -> bool:
        """Wait for the step to end: at most ``limit_s``, and at most ``grace_s`` after a halt."""
        start = time.monotonic()
        while not self.finished.is_set():
            if limit_s is not None and time.monotonic() - start > limit_s:
                return False
            if self.halted_ns is not None and (time.perf_counter_ns() - self.halted_ns) / 1e9 > grace_s:
                return False
            self.finished.wait(0.25)
        return True

    def _sleep_until(self, when_ns: int) -> bool:
        """Sleep until ``when_ns`` unless stopping; True if the step may go on."""
        while not self.stopping:
            left = (when_ns - time.perf_counter_ns()) / 1e9
            if left <= 0:
                return True
            self._wake.wait(left)
        return False

    def _may_send(self, planned_ns: int) -> bool:
        return not self.stopping and (self.deadline_ns is None or planned_ns < self.deadline_ns)

    @property
    def done_users(self) -> int:
        """Users (or the open-loop dispatcher) whose share of the step has ended."""
        return self._done_users

    def _user_done(self) -> None:
        for _ in range(100):  # a kill aimed at a request that had just ended may land here: absorb it
            try:
                self._recorders.join()
                break
            except Interrupted:
                continue
        self._done_users += 1
        if self._done_users >= self.expected_users:
            self._finish()

    def _finish(self) -> None:
        if not self.finished.is_set():
            self.end_ns = time.perf_counter_ns()
            self.cpu_s = time.process_time() - self.cpu0
            gc.unfreeze()
            self.finished.set()

    # --- users -------------------------------------------------------------------------------------------
    def new_client(self, concurrency: int = 1) -> StreamClient:
        """A streaming client of the configured backend."""
        return make_client(self.spec.client, self.root, self.timeouts, concurrency)

    def prepare(self, users: list[int]) -> None:
        """Build the first request of each of these users before the clock starts (the first draw of a
        stream costs tens of milliseconds, which would otherwise show as send lag)."""
        for user in users:
            stream = self.plan.user_stream(user)
            first = next(stream, None)
            self._streams[user] = itertools.chain([first] if first is not None else [], stream)

    def closed_user(self, user: int) -> None:
        """Run closed-loop user ``user`` to the end of its share of the step."""
        self.begin()
        assert self.t0_ns is not None
        stream = self._streams.pop(user, None) or self.plan.user_stream(user)
        client = self.new_client()
        quota = self.plan.user_quota(user)
        sent = 0
        free_at = self.t0_ns
        backoff = 0
        try:
            item = next(stream, None)
            while item is not None and (quota is None or sent < quota):
                planned = free_at + (int(item.think_s * 1e9) if sent else 0)
                if not self._may_send(planned) or not self._sleep_until(planned):
                    break
                upcoming = gevent.spawn(_when_idle, next, stream, None)  # drawn while this request is in flight
                ex = self._execute(item, user, planned, client)
                sent += 1
                free_at = ex.end_ns or time.perf_counter_ns()
                if ex.st.error_kind == "connection":
                    backoff += 1
                    free_at += int(min(1.0, 0.05 * 2 ** (backoff - 1)) * 1e9)
                else:
                    backoff = 0
                item = upcoming.get()
        except Interrupted:
            pass
        finally:
            client.close()
            self._user_done()

    def open_dispatch(self) -> None:
        """Send this process's share of the open-loop arrivals at their planned times; wait for them."""
        self.begin()
        assert self.t0_ns is not None
        client = self.new_client(OPEN_LOOP_CONNECTIONS)
        group = gevent.pool.Group()
        limit = self.plan.requests
        try:
            for n, item in enumerate(self.plan.arrivals()):
                if limit is not None and n >= limit:
                    break
                if n % self.nprocs != self.rank:
                    continue
                planned = self.t0_ns + int((item.offset_s or 0.0) * 1e9)
                if not self._may_send(planned) or not self._sleep_until(planned):
                    break
                group.spawn(self._open_request, item, planned, client)
            left = None if self.drain_deadline_ns is None else \
                max(0.0, (self.drain_deadline_ns - time.perf_counter_ns()) / 1e9)
            group.join(timeout=left)
            if len(group):
                self.halt(f"still running drain_timeout_s={self.spec.drain_timeout_s:g} after the step ended")
                group.join(timeout=5.0)
        except Interrupted:
            pass
        finally:
            group.kill(block=True, timeout=5.0)
            client.close()
            self._user_done()

    def _open_request(self, item: PlannedRequest, planned: int, client: StreamClient) -> None:
        with contextlib.suppress(Interrupted):
            self._execute(item, item.user, planned, client)

    # --- one request -------------------------------------------------------------------------------------
    def _execute(self, item: PlannedRequest, user: int, planned_ns: int, client: StreamClient) -> Exchange:
        wl = self.spec.workload
        body = json.dumps(item.body(self.spec.served_model, ignore_eos=wl.ignore_eos,
                                    temperature=wl.temperature)).encode("utf-8")
        ex = Exchange(api=item.api, send_ns=time.perf_counter_ns())
        me = gevent.getcurrent()
        self._inflight.add(me)
        try:
            if self.stopping:
                raise Interrupted("stopped before sending")
            client.post_stream(self.path, body, ex)
        except (Interrupted, gevent.GreenletExit) as exc:
            ex.interrupted(exc.reason if isinstance(exc, Interrupted) else "stopped")
            self._record(item, user, planned_ns, ex)
            raise
        finally:
            self._inflight.discard(me)
        self._recorders.spawn(_when_idle, self._record, item, user, planned_ns, ex)  # off the send and read paths
        self._health(ex)
        return ex

    def _health(self, ex: Exchange) -> None:
        now = time.perf_counter_ns()
        if ex.st.error_kind != "connection":
            self._conn_streak = 0
            self._last_ok_ns = now
            return
        self._conn_streak += 1
        silent_s = (now - self._last_ok_ns) / 1e9
        if self._conn_streak >= DEAD_MIN_ERRORS and silent_s >= DEAD_MIN_SECONDS:
            self.halt("server unreachable", error=f"server unreachable: {self._conn_streak} connection errors in "
                      f"a row over {silent_s:.1f} s (last: {ex.st.error_detail})")

    def _record(self, item: PlannedRequest, user: int, planned_ns: int, ex: Exchange) -> None:
        st = ex.st
        spec = self.spec
        assert self.t0_ns is not None
        output = st.completion_tokens
        if output is None and st.error_kind is None:
            output = len(st.chunk_ns)
        rec = RequestRecord(
            arm=spec.arm, step=spec.step_index, step_label=spec.step_label, concurrency=spec.level.concurrency,
            rate_rps=spec.level.rate_rps, user=user, request_id=f"{spec.arm}/{self.tag}/{item.key}",
            request_class=item.request_class, prefix_family=item.prefix_family, session_id=item.session_id,
            turn=item.turn, api=item.api, planned_send_ns=planned_ns, send_ns=ex.send_ns,
            send_wall_ns=self.wall0_ns + (ex.send_ns - self.t0_ns), first_byte_ns=ex.first_byte_ns,
            first_token_ns=st.first_token_ns, end_ns=ex.end_ns, chunk_ns=st.chunk_ns,
            prompt_tokens_target=item.prompt_tokens_target, output_tokens_target=item.output_tokens_target,
            prompt_tokens=st.prompt_tokens, output_tokens=output, cached_tokens=st.cached_tokens,
            http_status=ex.http_status, error_kind=st.error_kind, error_detail=st.error_detail,
            response_id=st.response_id, hash_ids=list(item.hash_ids),
            hash_block_tokens=spec.workload.hash_block_tokens, drill=spec.drill, drill_phase=spec.drill_phase,
            attempt=spec.attempt, first_token_parsed_ns=st.first_token_parsed_ns,
            first_token_source=st.first_token_source)
        self.requests += 1
        if st.error_kind is not None:
            self.errors_by_kind[st.error_kind] += 1
        if st.error_kind != "cancelled" or ex.first_byte_ns is not None:
            self.lags_ns.append(ex.send_ns - planned_ns)
        self.sink(dict(vars(rec)))  # a shallow to_row(): the lists are ours alone
