"""One load worker serving one step for a master (gevent-patched processes only: imports locust).

``python -m harness.load.locust_runner worker --master-host H --master-port P`` joins the master of a step (the
locust master a step's runner binds) and follows :mod:`harness.load.protocol`: it builds its share of the plan
(its rank), answers with the plan's fingerprint, answers the master's clock exchanges, runs its own users when told
to start, sends its records and a progress beat every half second, relays nothing it was not asked to, and sends
its report (:mod:`harness.load.worker_report`) when its share has ended. With ``--connect-timeout S`` it first waits
up to S seconds for the master's port to accept connections (between steps the port is closed), and gives the
locust handshake only what is left of S (at least :data:`MIN_HANDSHAKE_S`): something at the port that is not a
locust master ends it with :data:`NOT_A_MASTER`, never a traceback. ``--status-file`` receives a short JSON of
what it served. ``harness load-worker`` runs one such process per step (:mod:`harness.load.worker_cli`).

Exit statuses for that parent (:mod:`harness.load.protocol`): ``STEP_SERVED`` (the master ended the step; more may
follow), ``RUN_OVER_EXIT`` (the master said the run is over), ``NO_MASTER`` (no master within the timeout),
``NOT_A_MASTER``, ``REFUSED`` (the master ended without giving this worker a share: it came late, or the step
failed before it started), ``INTERRUPTED``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import gevent
import gevent.event
from locust.env import Environment
from locust.exception import RPCError, RPCReceiveError, RPCSendError

from harness.load import protocol as msg_type
from harness.load.driver import StepDriver
from harness.load.locust_users import HarnessClosedUser, make_plan, on_signals
from harness.load.protocol import INTERRUPTED, NO_MASTER, NOT_A_MASTER, REFUSED, RUN_OVER_EXIT, STEP_SERVED
from harness.load.spec import StepSpec
from harness.load.worker_report import fingerprint, self_report

__all__ = ["INTERRUPTED", "NOT_A_MASTER", "NO_MASTER", "REFUSED", "RUN_OVER_EXIT", "STEP_SERVED", "run_worker"]
PROBE_INTERVAL_S = 0.5
CONNECT_LIMIT_S = 60.0  # locust's own connect handshake, once the master's port answers
MIN_HANDSHAKE_S = 5.0
RUN_OVER_MESSAGE = msg_type.RUN_OVER


def master_listening(host: str, port: int) -> bool:
    """True when something accepts TCP connections at ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def wait_for_master(host: str, port: int, timeout_s: float) -> bool:
    """Poll the master's port until it answers (True) or ``timeout_s`` passes (False)."""
    deadline = time.monotonic() + timeout_s
    while True:
        if master_listening(host, port):
            return True
        if time.monotonic() >= deadline:
            return False
        gevent.sleep(min(PROBE_INTERVAL_S, max(0.0, deadline - time.monotonic())))


class _Relay:
    """A worker's record sink: batches rows to the master."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.rows: list[dict[str, Any]] = []

    def add_row(self, row: dict[str, Any]) -> None:
        """Buffer one record row."""
        self.rows.append(row)

    def send(self) -> None:
        """Send the buffered rows to the master."""
        if self.rows:
            rows, self.rows = self.rows, []
            self.runner.send_message("harness_records", {"rows": rows})


def _leave_now() -> None:
    """Ctrl-C before any step was set up here: nothing to flush."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(INTERRUPTED)



class _Share:
    """This worker's share of the current step: set up, started and ended by the master's messages."""

    def __init__(self, runner: Any, status_file: Path | None) -> None:
        self.runner = runner
        self.relay = _Relay(runner)
        self.status_file = status_file
        self.driver: StepDriver | None = None
        self.plan: Any = None
        self.rank = 0
        self.users: list[int] = []
        self.fingerprint: str | None = None
        self.started = 0
        self.run_over = False
        self.interrupted = False

    def send(self, kind: str, data: dict[str, Any]) -> None:
        """One message to the master (a broken link is noticed by the master's watch, not here)."""
        with contextlib.suppress(RPCError, RPCSendError, OSError):
            self.runner.send_message(kind, data)

    def setup(self, environment: Environment, msg: Any, **_: Any) -> None:
        """The master's step spec and this worker's rank: build the share, answer with its fingerprint (a repeated
        set-up, sent while this worker's answer was on its way, is answered again)."""
        if self.driver is not None:
            self.send(msg_type.READY, {"rank": self.rank, "plan_fingerprint": self.fingerprint})
            return
        spec = StepSpec.model_validate(msg.data["spec"])
        rank, nprocs = int(msg.data["rank"]), int(msg.data["nprocs"])
        try:
            plan = make_plan(spec)
        except ValueError as exc:
            self.send(msg_type.READY, {"rank": rank, "error": str(exc)})
            return
        closed = plan.mode == "closed"
        self.users = list(range(rank, plan.users, nprocs)) if closed else []
        driver = StepDriver(spec, plan, self.relay.add_row, rank=rank, nprocs=nprocs,
                            users_here=len(self.users) if closed else 1)
        driver.prepare(self.users)
        self.driver, self.plan, self.rank = driver, plan, rank
        self.fingerprint = fingerprint(plan)
        on_signals(lambda: self.stop_here("interrupted", True))
        self.send(msg_type.READY, {"rank": rank, "plan_fingerprint": self.fingerprint})

    def clock(self, environment: Environment, msg: Any, **_: Any) -> None:
        """Answer a clock exchange at once with this process's monotonic reading."""
        self.send(msg_type.CLOCK, {"seq": msg.data.get("seq"), "t": msg.data.get("t"), "w": time.perf_counter_ns()})

    def start(self, environment: Environment, msg: Any, **_: Any) -> None:
        """Run this worker's users (or its open-loop dispatcher) now."""
        driver = self.driver
        if driver is None or driver.t0_ns is not None:
            return
        driver.begin()
        if self.plan.mode == "closed":
            for user in self.users:
                gevent.spawn(driver.closed_user, user)
                self.started += 1
        else:
            gevent.spawn(driver.open_dispatch)
            self.started = 1
        gevent.spawn(self._beat_and_report, driver)

    def end_sending(self, environment: Environment, msg: Any, **_: Any) -> None:
        """A sequential look settled the step: no more sending (in-flight requests drain)."""
        if self.driver is not None:
            self.driver.end_sending()

    def halt(self, environment: Environment, msg: Any, **_: Any) -> None:
        """Stop this worker's share of the step."""
        self.stop_here(str(msg.data.get("reason", "stopped")), bool(msg.data.get("interrupted", False)))

    def stop_here(self, reason: str, interrupted: bool) -> None:
        """Halt the share (records of in-flight requests say why)."""
        self.interrupted = self.interrupted or interrupted
        if self.driver is not None:
            self.driver.halt(reason, interrupted=interrupted)

    def over(self, environment: Environment, msg: Any, **_: Any) -> None:
        """The master says the run is over: no more steps will come."""
        self.run_over = True

    def _beat(self, driver: StepDriver) -> None:
        self.relay.send()
        self.send(msg_type.BEAT, {"rank": self.rank, "started": self.started, "expected": driver.expected_users,
                                  "done": driver.done_users, "requests": driver.requests})

    def _beat_and_report(self, driver: StepDriver) -> None:
        while not driver.finished.wait(msg_type.BEAT_INTERVAL_S):
            self._beat(driver)
        self._beat(driver)
        wall_s = ((driver.end_ns or 0) - (driver.t0_ns or 0)) / 1e9
        me = self_report(rank=self.rank, pid=os.getpid(), requests=driver.requests, cpu_s=driver.cpu_s,
                         wall_s=max(wall_s, 0.0), lags_ns=driver.lags_ns, plan=self.plan,
                         plan_fingerprint=self.fingerprint)
        if self.status_file is not None:  # before DONE: the master quits (and this process ends) once all are done
            spec = driver.spec
            status = {"arm": spec.arm, "step_label": spec.step_label, "step": spec.step_index, "rank": self.rank,
                      "requests": driver.requests, "error": driver.error}
            with contextlib.suppress(OSError):
                self.status_file.write_text(json.dumps(status), encoding="utf-8")
        self.send(msg_type.DONE, {**me.model_dump(), "interrupted": driver.interrupted, "error": driver.error,
                                  "ended_early": driver.ended_early})


def _connect(env: Environment, host: str, port: int, limit_s: float) -> Any:
    """Locust's worker handshake within ``limit_s``; None when whatever answers is not a locust master."""
    try:
        with gevent.Timeout(limit_s):
            return env.create_worker_runner(host, port)
    except (gevent.Timeout, ConnectionError, OSError, RPCError, RPCSendError, RPCReceiveError):
        return None


def run_worker(master_host: str, master_port: int, connect_timeout_s: float | None = None,
               status_file: Path | None = None) -> int:
    """Join a master, run the share of the step it assigns, send the records back; exit when it quits."""
    on_signals(_leave_now)
    deadline = None if connect_timeout_s is None else time.monotonic() + connect_timeout_s
    if connect_timeout_s is not None and not wait_for_master(master_host, master_port, connect_timeout_s):
        return NO_MASTER
    limit = CONNECT_LIMIT_S if deadline is None else \
        min(CONNECT_LIMIT_S, max(MIN_HANDSHAKE_S, deadline - time.monotonic()))
    env = Environment(user_classes=[HarnessClosedUser])
    runner = _connect(env, master_host, master_port, limit)
    if runner is None:
        return NOT_A_MASTER
    share = _Share(runner, status_file)
    for kind, handler in ((msg_type.SETUP, share.setup), (msg_type.CLOCK, share.clock), (msg_type.START, share.start),
                          (msg_type.END_SENDING, share.end_sending), (msg_type.HALT, share.halt),
                          (msg_type.RUN_OVER, share.over)):
        runner.register_message(kind, handler)
    runner.greenlet.join()
    with_client = getattr(runner, "client", None)
    if with_client is not None:
        with contextlib.suppress(Exception):
            with_client.close()
    if share.run_over:
        return RUN_OVER_EXIT
    if share.interrupted:
        return INTERRUPTED
    return STEP_SERVED if share.driver is not None and share.driver.t0_ns is not None else REFUSED

