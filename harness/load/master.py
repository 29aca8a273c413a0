"""Several load processes or machines: a locust master with workers (gevent-patched processes only).

The master (the runner process ``run_step`` started) binds ``master_bind_host:master_port``, starts
``processes`` local workers and waits for ``remote_workers`` more, then sends each worker the step spec and
its rank. Locust's dispatcher hands users out round-robin over its sorted workers, so the worker of rank
``r`` of ``P`` gets users ``r, r + P, r + 2P, ...``: the same user streams as in one process. Open-loop
steps run one dispatcher per worker, worker ``r`` taking arrivals ``r, r + P, ...``.

Workers send their records in batches (``harness_records``) and a final ``harness_done`` with their CPU
time; the master alone writes record parts. Remote workers need the harness installed (and a replayed
trace at the same path); they reach the model server themselves.
"""

from __future__ import annotations

import itertools
import socket
import subprocess
import sys
import time
from collections import Counter, defaultdict
from typing import Any

import gevent
import gevent.event
from locust.env import Environment

from harness.load.driver import StepDriver
from harness.load.health import lag_stats_ms
from harness.load.locust_users import (
    CTX,
    HarnessClosedUser,
    HarnessOpenUser,
    StepShape,
    flush_loop,
    hard_limit,
    make_plan,
    make_writer,
    on_signals,
)
from harness.load.spec import RunnerOutcome, StepSpec

RELAY_INTERVAL_S = 0.5
DONE_WAIT_S = 10.0


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
        self.all_done = gevent.event.Event()
        self.expected = 0

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
        self.done[int(msg.data["rank"])] = dict(msg.data)
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
    env = Environment(user_classes=[HarnessClosedUser if plan.mode == "closed" else HarnessOpenUser],
                      shape_class=StepShape(users, col.all_done.is_set))
    port = spec.master_port or _free_port(spec.master_bind_host)
    runner = env.create_master_runner(spec.master_bind_host, port)
    runner.register_message("harness_records", col.on_records)
    runner.register_message("harness_done", col.on_done)
    host = "127.0.0.1" if spec.master_bind_host in ("*", "0.0.0.0") else spec.master_bind_host
    procs = [subprocess.Popen([sys.executable, "-m", "harness.load.locust_runner", "worker", "--master-host",
                               host, "--master-port", str(port)]) for _ in range(local)]
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
        ranks = dispatch_ranks(ready)
        for cid, rank in ranks.items():
            runner.send_message("harness_setup", {"spec": spec.model_dump(mode="json"), "rank": rank,
                                                  "nprocs": expected}, client_id=cid)
        start_ns, start_wall = time.perf_counter_ns(), time.time_ns()
        runner.start_shape()
        error = _wait(runner, col, ranks, stopping, hard_limit(spec, plan))
        end_ns, end_wall = time.perf_counter_ns(), time.time_ns()
    finally:
        runner.quit()
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
    p50, p99, lag_max = lag_stats_ms(col.lags_ns)
    return RunnerOutcome(
        start_ns=start_ns, end_ns=end_ns, start_wall_ns=start_wall, end_wall_ns=end_wall, requests=col.requests,
        errors=sum(col.errors.values()), errors_by_kind=dict(col.errors), records_written=col.writer.written,
        interrupted=stopping.is_set() or any(bool(w.get("interrupted")) for w in workers),
        error=error or (errors_from_workers[0] if errors_from_workers else None), harness_failure=error is not None,
        cpu_s=cpu_s,
        wall_s=(end_ns - start_ns) / 1e9, processes=expected,
        max_process_cpu_percent=round(max(per_proc), 1) if per_proc else None, send_lag_ms_p50=p50,
        send_lag_ms_p99=p99, send_lag_ms_max=lag_max, warnings=plan.warnings,
        parts=[str(p) for p in col.writer.parts])


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


def run_worker(master_host: str, master_port: int) -> int:
    """Join a master, run the share of the step it assigns, send the records back; exit when it quits."""
    env = Environment(user_classes=[HarnessClosedUser, HarnessOpenUser])
    runner = env.create_worker_runner(master_host, master_port)
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
        gevent.spawn(relay.loop, driver.finished)
        gevent.spawn(_report_done, driver, relay, runner, rank)
        if users_here == 0:  # more workers than users: nothing to run here
            driver.begin()

    def stop_here(reason: str, interrupted: bool) -> None:
        if CTX.driver is not None:
            CTX.driver.halt(reason, interrupted=interrupted)

    def halt(environment: Environment, msg: Any, **_: Any) -> None:
        """Stop this worker's share of the step."""
        stop_here(str(msg.data.get("reason", "stopped")), bool(msg.data.get("interrupted", False)))

    runner.register_message("harness_setup", setup)
    runner.register_message("harness_halt", halt)
    on_signals(lambda: stop_here("interrupted", True))
    runner.greenlet.join()
    return 0


def _report_done(driver: StepDriver, relay: _Relay, runner: Any, rank: int) -> None:
    driver.finished.wait()
    relay.send()
    wall_s = ((driver.end_ns or 0) - (driver.t0_ns or 0)) / 1e9
    runner.send_message("harness_done", {"rank": rank, "cpu_s": driver.cpu_s, "wall_s": wall_s,
                                         "interrupted": driver.interrupted, "error": driver.error})
