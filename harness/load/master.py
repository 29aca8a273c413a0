"""Several load processes or machines: a locust master with workers (gevent-patched processes only).

The master (the runner process ``run_step`` started) binds ``master_bind_host:master_port``, starts
``processes`` local workers and waits for ``remote_workers`` more, then fixes the step's worker set (ranks in a
stable order; later arrivals are refused), sets each worker up and checks its plan fingerprint, measures its
clock, and tells them all to start (:mod:`harness.load.protocol`, :mod:`.master_gate`). The worker of rank ``r``
of ``P`` runs users ``r, r + P, r + 2P, ...`` itself (open loop: arrivals ``r, r + P, ...``): the same user
streams as in one process, and locust's dispatcher never moves users between workers.

Workers send their records in batches and a final report (host, CPU, send lag, plan fingerprint:
:mod:`harness.load.worker_report`); the master moves every row onto its own clock (:mod:`.clocks`) and alone
writes record parts. While the step runs :mod:`.master_watch` relays a sequential look's stop to every worker and
notices a lost or stalled one. Remote workers need the harness installed (and a replayed trace at the same path);
they reach the model server themselves. When more workers connect than expected before the set is fixed, all of
them share the step (said in the step's layout note). At the end of a run :func:`say_run_over` binds the master's
address once more and tells the workers that connect that no more steps will come.
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

from harness.core.net.bind import connect_host, free_port
from harness.load import protocol as msg_type
from harness.load.clocks import shift_row
from harness.load.health import lag_stats_ms
from harness.load.locust_users import HarnessClosedUser, flush_loop, hard_limit, make_plan, make_writer, on_signals
from harness.load.master_gate import WorkerGate
from harness.load.master_watch import WatchResult, watch
from harness.load.spec import RunnerOutcome, StepSpec, WorkerReport
from harness.load.worker_report import fingerprint, from_message, host_name

SETUP_WAIT_S = 30.0  # each worker builds its share of the plan before it answers
UNBIND_LINGER_MS = 1000  # messages still queued (the workers' quit) get this long to leave
RUN_OVER_GRACE_S = 1.0  # for the run-over messages to leave before the farewell master quits


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host if host not in ("*", "0.0.0.0") else "", 0))
        port: int = sock.getsockname()[1]
        return port


def dispatch_ranks(client_ids: list[str]) -> dict[str, int]:
    """Ranks in a stable order that interleaves hosts (index within host, then id; as locust's dispatcher)."""
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
        self.gate: WorkerGate | None = None
        self.local_pids: set[int] = set()
        self.here = host_name()

    def on_records(self, environment: Environment, msg: Any, **_: Any) -> None:
        """A batch of record rows from a worker, moved onto the master's clock."""
        gate = self.gate
        if gate is None or msg.node_id not in gate.ranks:
            return
        offset = gate.offset_ns(msg.node_id)
        for row in msg.data["rows"]:
            shift_row(row, offset)
            self.writer.add_row(row)
            self.requests += 1
            if row["error_kind"] is not None:
                self.errors[row["error_kind"]] += 1
            if row["error_kind"] != "cancelled" or row["first_byte_ns"] is not None:
                self.lags_ns.append(row["send_ns"] - row["planned_send_ns"])

    def on_done(self, environment: Environment, msg: Any, **_: Any) -> None:
        """A worker finished its share of the step."""
        gate = self.gate
        if gate is None or msg.node_id not in gate.ranks:
            return
        rank = gate.ranks[msg.node_id]
        self.done[rank] = dict(msg.data)
        report = from_message(dict(msg.data) | {"rank": rank}, self.local_pids, self.here)
        if report is not None:
            self.reports[rank] = report
        if len(self.done) >= len(gate.ranks):
            self.all_done.set()


def _wait_for_workers(runner: Any, expected: int, wait_s: float, stopping: Any) -> list[str]:
    deadline = time.monotonic() + wait_s
    while len(runner.clients.ready) < expected and time.monotonic() < deadline and not stopping.is_set():
        gevent.sleep(0.1)
    return [w.id for w in runner.clients.ready]


def run_master(spec: StepSpec) -> RunnerOutcome:
    """Run the step over local and remote workers; write all records here."""
    plan = make_plan(spec)  # validates the workload before any worker starts
    planned = fingerprint(plan)
    local = spec.processes if spec.processes > 1 else 0
    expected = local + spec.remote_workers
    col = _Collector(spec)
    env = Environment(user_classes=[HarnessClosedUser])
    port = spec.master_port or free_port(spec.master_bind_host)  # IPv4, IPv6 (::) or a name
    runner = env.create_master_runner(spec.master_bind_host, port)
    gate = col.gate = WorkerGate(runner)
    runner.register_message(msg_type.RECORDS, col.on_records)
    runner.register_message(msg_type.DONE, col.on_done)
    host = connect_host(spec.master_bind_host)  # the local workers' way in: loopback for "every interface"
    procs = [subprocess.Popen([sys.executable, "-m", "harness.load.locust_runner", "worker", "--master-host",
                               host, "--master-port", str(port)]) for _ in range(local)]
    col.local_pids = {proc.pid for proc in procs}
    warnings = list(plan.warnings)
    notes: list[str] = []
    stopping = gevent.event.Event()
    on_signals(stopping.set)
    flusher = gevent.spawn(flush_loop, col.writer, col.all_done)
    start_ns, start_wall = time.perf_counter_ns(), time.time_ns()
    watched = WatchResult()
    try:
        ready = _wait_for_workers(runner, expected, spec.worker_wait_s, stopping)
        if len(ready) < expected:
            raise RuntimeError(f"only {len(ready)} of {expected} load workers connected within "
                               f"{spec.worker_wait_s:g} s (master {spec.master_bind_host}:{port})")
        if len(ready) > expected:  # every worker counted so far takes part; later ones are refused
            notes.append(f"{len(ready)} load workers connected where {expected} were expected; all of them "
                         "shared the step")
        gate.fix(dispatch_ranks(ready))
        worker_spec = spec.model_copy(update={"stop_path": None}).model_dump(mode="json")
        watched.error = gate.set_up(worker_spec, max(SETUP_WAIT_S, spec.worker_wait_s), stopping) or \
            gate.check_plans(planned)
        if watched.error is None and not stopping.is_set():
            notes += gate.sync_clocks(stopping)
            start_ns, start_wall = time.perf_counter_ns(), time.time_ns()
            gate.broadcast(msg_type.START, {})
            watched = watch(gate, col.done, col.all_done, stopping, hard_limit(spec, plan), spec.stop_path)
        else:
            gate.broadcast(msg_type.HALT, {"reason": watched.error or "interrupted", "interrupted": stopping.is_set()})
            start_ns, start_wall = time.perf_counter_ns(), time.time_ns()
        end_ns, end_wall = time.perf_counter_ns(), time.time_ns()
    finally:
        refused = gate.refusal_note()
        quit_and_unbind(runner)
        col.all_done.set()
        flusher.join(timeout=30.0)  # never kill it: it may be inside a part write
        col.writer.flush()
        for proc in procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
    notes += [refused] if refused else []
    return _outcome(spec, col, watched, notes, warnings, planned, (start_ns, end_ns, start_wall, end_wall),
                    stopping.is_set(), len(gate.ranks))


def _outcome(spec: StepSpec, col: _Collector, watched: WatchResult, notes: list[str], warnings: list[str],
             planned: str, clocks: tuple[int, int, int, int], stopped: bool, nprocs: int) -> RunnerOutcome:
    start_ns, end_ns, start_wall, end_wall = clocks
    workers = list(col.done.values())
    cpu_s = sum(float(w.get("cpu_s", 0.0)) for w in workers)
    per_proc = [100 * float(w["cpu_s"]) / float(w["wall_s"]) for w in workers if float(w.get("wall_s", 0)) > 0]
    errors_from_workers = [str(w["error"]) for w in workers if w.get("error")]
    error = watched.error
    p50, p99, lag_max = lag_stats_ms(col.lags_ns)
    ended_early = any(bool(w.get("ended_early")) for w in workers)
    return RunnerOutcome(
        start_ns=start_ns, end_ns=end_ns, start_wall_ns=start_wall, end_wall_ns=end_wall, requests=col.requests,
        errors=sum(col.errors.values()), errors_by_kind=dict(col.errors), records_written=col.writer.written,
        interrupted=stopped or any(bool(w.get("interrupted")) for w in workers),
        error=error or (errors_from_workers[0] if errors_from_workers else None), harness_failure=error is not None,
        cpu_s=cpu_s, wall_s=(end_ns - start_ns) / 1e9, processes=nprocs or spec.processes,
        max_process_cpu_percent=round(max(per_proc), 1) if per_proc else None, send_lag_ms_p50=p50,
        send_lag_ms_p99=p99, send_lag_ms_max=lag_max, warnings=warnings + notes, layout_notes=notes,
        parts=[str(p) for p in col.writer.parts], workers=[col.reports[r] for r in sorted(col.reports)],
        plan_fingerprint=planned, ended_early=ended_early)


def say_run_over(bind_host: str, port: int, expected: int, wait_s: float) -> int:
    """Bind the master's address once more and tell up to ``expected`` workers that connect within ``wait_s``
    that the run is over (``harness load-worker`` then exits 0); returns how many were told."""
    env = Environment(user_classes=[HarnessClosedUser])
    runner = env.create_master_runner(bind_host, port)
    told: set[str] = set()
    try:
        deadline = time.monotonic() + wait_s
        grace_end: float | None = None
        while grace_end is None or time.monotonic() < grace_end:
            # sent again every round: a message that reaches a worker before its handler is registered is lost
            for worker in list(runner.clients.ready):
                runner.send_message(msg_type.RUN_OVER, {"pid": os.getpid()}, client_id=worker.id)
                told.add(worker.id)
            if grace_end is None and (len(told) >= expected or time.monotonic() >= deadline):
                grace_end = time.monotonic() + (RUN_OVER_GRACE_S if told else 0.0)
            gevent.sleep(0.25)
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
