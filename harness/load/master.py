"""Several load processes or machines: a locust master with workers (gevent-patched processes only).

The master (the runner process ``run_step`` started) binds ``master_bind_host:master_port``, starts
``processes`` local workers and waits for ``remote_workers`` more, then sends each worker the step spec and
its rank. Locust's dispatcher hands users out round-robin over its sorted workers, so the worker of rank
``r`` of ``P`` gets users ``r, r + P, r + 2P, ...``: the same user streams as in one process. Open-loop
steps run one dispatcher per worker, worker ``r`` taking arrivals ``r, r + P, ...``.

Workers send their records in batches (``harness_records``) and a final ``harness_done`` with their own
report (host, CPU, send lag, plan fingerprint: :mod:`harness.load.worker_report`); the master alone writes record
parts. A worker whose plan fingerprint differs from the master's fails the step. Remote workers need the harness
installed (and a replayed trace at the same path); they reach the model server themselves. When more workers
connect than expected, all of them share the step (with a warning). At the end of a run :func:`say_run_over`
binds the master's address once more and tells the workers that connect that no more steps will come.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections import Counter, defaultdict
from typing import Any

import gevent
import gevent.event
from locust.env import Environment

from harness.load.health import lag_stats_ms
from harness.load.locust_users import (
    HarnessClosedUser,
    HarnessOpenUser,
    StepShape,
    flush_loop,
    hard_limit,
    make_plan,
    make_writer,
    on_signals,
)
from harness.load.spec import RunnerOutcome, StepSpec, WorkerReport
from harness.load.worker import RUN_OVER_MESSAGE
from harness.load.worker_report import fingerprint, from_message, host_name

DONE_WAIT_S = 10.0
UNBIND_LINGER_MS = 1000  # messages still queued (the workers' quit) get this long to leave
RUN_OVER_GRACE_S = 1.0  # for the run-over messages to leave before the farewell master quits


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host if host not in ("*", "0.0.0.0") else "", 0))
        port: int = sock.getsockname()[1]
        return port


def dispatch_ranks(client_ids: list[str]) -> dict[str, int]:
    """Ranks in the order locust's ``UsersDispatcher`` cycles through workers (index within host, then id)."""
    per_host: defaultdict[str, int] = defaultdict(int)
    index: dict[str, int] = {}
    for cid in sorted(client_ids):
        host = cid.split("_")[0]
        index[cid] = per_host[host]
        per_host[host] += 1
    ordered = sorted(client_ids, key=lambda c: (index[c], c))
    return {cid: rank for rank, cid in enumerate(ordered)}


class _Collector:
    """The master's view of the workers' records and completion."""

    def __init__(self, spec: StepSpec) -> None:
        self.writer = make_writer(spec)
        self.requests = 0
        self.errors: Counter[str] = Counter()
        self.lags_ns: list[int] = []
        self.done: dict[int, dict[str, Any]] = {}
        self.reports: dict[int, WorkerReport] = {}
        self.all_done = gevent.event.Event()
        self.expected = 0
        self.local_pids: set[int] = set()
        self.here = host_name()

    def on_records(self, environment: Environment, msg: Any, **_: Any) -> None:
        """A batch of record rows from a worker."""
        for row in msg.data["rows"]:
            self.writer.add_row(row)
            self.requests += 1
            if row["error_kind"] is not None:
                self.errors[row["error_kind"]] += 1
            if row["error_kind"] != "cancelled" or row["first_byte_ns"] is not None:
                self.lags_ns.append(row["send_ns"] - row["planned_send_ns"])

    def on_done(self, environment: Environment, msg: Any, **_: Any) -> None:
        """A worker finished its share of the step."""
        rank = int(msg.data["rank"])
        self.done[rank] = dict(msg.data)
        report = from_message(dict(msg.data), self.local_pids, self.here)
        if report is not None:
            self.reports[rank] = report
        if len(self.done) >= self.expected:
            self.all_done.set()


def run_master(spec: StepSpec) -> RunnerOutcome:
    """Run the step over local and remote workers; write all records here."""
    plan = make_plan(spec)  # validates the workload before any worker starts
    local = spec.processes if spec.processes > 1 else 0
    expected = local + spec.remote_workers
    col = _Collector(spec)
    col.expected = expected
    users = plan.users if plan.mode == "closed" else expected
    shape = StepShape(users, col.all_done.is_set)
    env = Environment(user_classes=[HarnessClosedUser if plan.mode == "closed" else HarnessOpenUser],
                      shape_class=shape)
    port = spec.master_port or _free_port(spec.master_bind_host)
    runner = env.create_master_runner(spec.master_bind_host, port)
    runner.register_message("harness_records", col.on_records)
    runner.register_message("harness_done", col.on_done)
    host = "127.0.0.1" if spec.master_bind_host in ("*", "0.0.0.0") else spec.master_bind_host
    procs = [subprocess.Popen([sys.executable, "-m", "harness.load.locust_runner", "worker", "--master-host",
                               host, "--master-port", str(port)]) for _ in range(local)]
    col.local_pids = {proc.pid for proc in procs}
    warnings = list(plan.warnings)
    stopping = gevent.event.Event()
    on_signals(stopping.set)
    flusher = gevent.spawn(flush_loop, col.writer, col.all_done)
    try:
        deadline = time.monotonic() + spec.worker_wait_s
        while len(runner.clients.ready) < expected and time.monotonic() < deadline and not stopping.is_set():
            gevent.sleep(0.1)
        ready = [w.id for w in runner.clients.ready]
        if len(ready) < expected:
            raise RuntimeError(f"only {len(ready)} of {expected} load workers connected within "
                               f"{spec.worker_wait_s:g} s (master {spec.master_bind_host}:{port})")
        if len(ready) > expected:  # every connected worker takes part, or locust would give the extras users
            warnings.append(f"{len(ready)} load workers connected where {expected} were expected; all of them "
                            "shared the step")
            expected = col.expected = len(ready)
            if plan.mode != "closed":
                shape.users = expected
        ranks = dispatch_ranks(ready)
        for cid, rank in ranks.items():
            runner.send_message("harness_setup", {"spec": spec.model_dump(mode="json"), "rank": rank,
                                                  "nprocs": expected}, client_id=cid)
        start_ns, start_wall = time.perf_counter_ns(), time.time_ns()
        runner.start_shape()
        error = _wait(runner, col, ranks, stopping, hard_limit(spec, plan))
        end_ns, end_wall = time.perf_counter_ns(), time.time_ns()
    finally:
        quit_and_unbind(runner)
        flusher.join(timeout=30.0)  # never kill it: it may be inside a part write
        col.writer.flush()
        for proc in procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
    workers = list(col.done.values())
    cpu_s = sum(float(w.get("cpu_s", 0.0)) for w in workers)
    per_proc = [100 * float(w["cpu_s"]) / float(w["wall_s"]) for w in workers if float(w.get("wall_s", 0)) > 0]
    errors_from_workers = [str(w["error"]) for w in workers if w.get("error")]
    planned = fingerprint(plan)
    differing = sorted(f"rank {r.rank} on {r.host}" for r in col.reports.values()
                       if r.plan_fingerprint is not None and r.plan_fingerprint != planned)
    if differing and error is None:
        error = (f"load worker(s) {', '.join(differing)} planned different requests than the master (plan "
                 "fingerprint differs): run the same harness version, with the same trace file, on every machine")
    p50, p99, lag_max = lag_stats_ms(col.lags_ns)
    return RunnerOutcome(
        start_ns=start_ns, end_ns=end_ns, start_wall_ns=start_wall, end_wall_ns=end_wall, requests=col.requests,
        errors=sum(col.errors.values()), errors_by_kind=dict(col.errors), records_written=col.writer.written,
        interrupted=stopping.is_set() or any(bool(w.get("interrupted")) for w in workers),
        error=error or (errors_from_workers[0] if errors_from_workers else None), harness_failure=error is not None,
        cpu_s=cpu_s,
        wall_s=(end_ns - start_ns) / 1e9, processes=expected,
        max_process_cpu_percent=round(max(per_proc), 1) if per_proc else None, send_lag_ms_p50=p50,
        send_lag_ms_p99=p99, send_lag_ms_max=lag_max, warnings=warnings,
        parts=[str(p) for p in col.writer.parts], workers=[col.reports[r] for r in sorted(col.reports)],
        plan_fingerprint=planned)


def _wait(runner: Any, col: _Collector, ranks: dict[str, int], stopping: gevent.event.Event,
          limit_s: float | None) -> str | None:
    """Wait for every worker's ``harness_done``; halt them all on Ctrl-C, a lost worker or the time limit."""
    started = time.monotonic()
    halted_at: float | None = None
    error: str | None = None
    while not col.all_done.is_set():
        now = time.monotonic()
        if halted_at is None:
            lost = [cid for cid, rank in ranks.items() if rank not in col.done and
                    (cid not in runner.clients or runner.clients[cid].state == "missing")]
            reason = None
            if stopping.is_set():
                reason = "interrupted"
            elif lost:
                reason = error = f"load worker(s) stopped responding: {', '.join(sorted(lost))}"
            elif limit_s is not None and now - started > limit_s:
                reason = error = "the step did not end within duration + drain + 30 s"
            if reason is not None:
                runner.send_message("harness_halt", {"reason": reason, "interrupted": stopping.is_set()})
                halted_at = now
        elif now - halted_at > DONE_WAIT_S:
            break
        col.all_done.wait(0.25)
    return error


def say_run_over(bind_host: str, port: int, expected: int, wait_s: float) -> int:
    """Bind the master's address once more and tell up to ``expected`` workers that connect within ``wait_s``
    that the run is over (``harness load-worker`` then exits 0); returns how many were told."""
    env = Environment(user_classes=[HarnessClosedUser])
    runner = env.create_master_runner(bind_host, port)
    told: set[str] = set()
    try:
        deadline = time.monotonic() + wait_s
        while len(told) < expected and time.monotonic() < deadline:
            for worker in list(runner.clients.ready):
                if worker.id not in told:
                    runner.send_message(RUN_OVER_MESSAGE, {"pid": os.getpid()}, client_id=worker.id)
                    told.add(worker.id)
            gevent.sleep(0.1)
        gevent.sleep(RUN_OVER_GRACE_S if told else 0.0)
    finally:
        quit_and_unbind(runner)
    return len(told)


def quit_and_unbind(runner: Any) -> None:
    """Quit the master and close its socket, so the next step (same process, same fixed port) can bind it."""
    try:
        runner.quit()
    finally:
        server = getattr(runner, "server", None)
        if server is not None:
            server.close(linger=UNBIND_LINGER_MS)
