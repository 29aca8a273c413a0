"""One load worker serving one step for a master (gevent-patched processes only: imports locust).

``python -m harness.load.locust_runner worker --master-host H --master-port P`` joins the master of a step (the
locust master a step's runner binds), runs the share of the step the master assigns (its rank), sends the records
and its own report (:mod:`harness.load.worker_report`) back, and exits when the master ends the step. With
``--connect-timeout S`` it first waits up to S seconds for the master's port to accept connections (between steps
the port is closed); ``--status-file`` receives a short JSON of what it served. ``harness load-worker`` runs one
such process per step (:mod:`harness.load.worker_cli`).

Exit statuses for that parent: :data:`STEP_SERVED` (the master ended the step; more may follow), :data:`RUN_OVER`
(the master said the run is over), :data:`NO_MASTER` (no master within the timeout), :data:`INTERRUPTED`.
"""

from __future__ import annotations

import contextlib
import itertools
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

from harness.load.driver import StepDriver
from harness.load.locust_users import CTX, HarnessClosedUser, HarnessOpenUser, make_plan, on_signals
from harness.load.spec import StepSpec
from harness.load.worker_report import self_report

STEP_SERVED, RUN_OVER, NO_MASTER, INTERRUPTED = 0, 3, 5, 130
RELAY_INTERVAL_S = 0.5
PROBE_INTERVAL_S = 0.5
CONNECT_LIMIT_S = 60.0  # locust's own connect handshake, once the master's port answers
RUN_OVER_MESSAGE = "harness_run_over"


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

    def loop(self, stop: gevent.event.Event) -> None:
        """Send buffered rows every half second until ``stop`` is set."""
        while not stop.wait(RELAY_INTERVAL_S):
            self.send()


def _leave_now() -> None:
    """Ctrl-C before any step was set up here: nothing to flush."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(INTERRUPTED)


def run_worker(master_host: str, master_port: int, connect_timeout_s: float | None = None,
               status_file: Path | None = None) -> int:
    """Join a master, run the share of the step it assigns, send the records back; exit when it quits."""
    on_signals(_leave_now)
    if connect_timeout_s is not None and not wait_for_master(master_host, master_port, connect_timeout_s):
        return NO_MASTER
    state: dict[str, Any] = {"run_over": False, "interrupted": False}
    env = Environment(user_classes=[HarnessClosedUser, HarnessOpenUser])
    try:
        with gevent.Timeout(CONNECT_LIMIT_S):
            runner = env.create_worker_runner(master_host, master_port)
    except (gevent.Timeout, ConnectionError):
        return NO_MASTER
    relay = _Relay(runner)

    def setup(environment: Environment, msg: Any, **_: Any) -> None:
        """The master's step spec and this worker's rank."""
        spec = StepSpec.model_validate(msg.data["spec"])
        rank, nprocs = int(msg.data["rank"]), int(msg.data["nprocs"])
        try:
            plan = make_plan(spec)
        except ValueError as exc:
            runner.send_message("harness_done", {"rank": rank, "cpu_s": 0.0, "wall_s": 0.0, "error": str(exc)})
            return
        users_here = len(range(rank, plan.users, nprocs)) if plan.mode == "closed" else 1
        driver = StepDriver(spec, plan, relay.add_row, rank=rank, nprocs=nprocs, users_here=users_here)
        if plan.mode == "closed":
            driver.prepare(list(range(rank, plan.users, nprocs)))
        CTX.reset(driver, (rank + nprocs * k for k in itertools.count()))
        on_signals(lambda: stop_here("interrupted", True))
        gevent.spawn(relay.loop, driver.finished)
        gevent.spawn(_report_done, driver, relay, runner, rank, plan, status_file)
        if users_here == 0:  # more workers than users: nothing to run here
            driver.begin()

    def stop_here(reason: str, interrupted: bool) -> None:
        state["interrupted"] = state["interrupted"] or interrupted
        if CTX.driver is not None:
            CTX.driver.halt(reason, interrupted=interrupted)

    def halt(environment: Environment, msg: Any, **_: Any) -> None:
        """Stop this worker's share of the step."""
        stop_here(str(msg.data.get("reason", "stopped")), bool(msg.data.get("interrupted", False)))

    def run_over(environment: Environment, msg: Any, **_: Any) -> None:
        """The master says the run is over: no more steps will come."""
        state["run_over"] = True

    runner.register_message("harness_setup", setup)
    runner.register_message("harness_halt", halt)
    runner.register_message(RUN_OVER_MESSAGE, run_over)
    runner.greenlet.join()
    with_client = getattr(runner, "client", None)
    if with_client is not None:
        with_client.close()
    if state["run_over"]:
        return RUN_OVER
    return INTERRUPTED if state["interrupted"] else STEP_SERVED


def _report_done(driver: StepDriver, relay: _Relay, runner: Any, rank: int, plan: Any,
                 status_file: Path | None) -> None:
    driver.finished.wait()
    relay.send()
    wall_s = ((driver.end_ns or 0) - (driver.t0_ns or 0)) / 1e9
    me = self_report(rank=rank, pid=os.getpid(), requests=driver.requests, cpu_s=driver.cpu_s,
                     wall_s=max(wall_s, 0.0), lags_ns=driver.lags_ns, plan=plan)
    if status_file is not None:  # before harness_done: the master quits (and this process ends) once all are done
        spec = driver.spec
        status = {"arm": spec.arm, "step_label": spec.step_label, "step": spec.step_index, "rank": rank,
                  "requests": driver.requests, "error": driver.error}
        with contextlib.suppress(OSError):
            status_file.write_text(json.dumps(status), encoding="utf-8")
    runner.send_message("harness_done", {**me.model_dump(), "interrupted": driver.interrupted,
                                         "error": driver.error})
