"""Locust users, the step shape and the one-process runner (imports locust: gevent-patched processes only).

:class:`StepShape` is the step as a ``LoadTestShape``: all of the step's users start at once and are held until
the step has ended. Each :class:`HarnessClosedUser` runs one closed-loop user of the plan; one
:class:`HarnessOpenUser` per process dispatches that process's open-loop arrivals. Users reach the step's
:class:`~harness.load.driver.StepDriver` through :data:`CTX` (one step per process).
"""

from __future__ import annotations

import importlib.abc
import itertools
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gevent
import gevent.event
import pyarrow as pa
from locust import User, constant, task
from locust.env import Environment
from locust.shape import LoadTestShape

from harness.load.driver import StepDriver
from harness.load.health import lag_stats_ms
from harness.load.spec import RunnerOutcome, StepSpec
from harness.load.worker_report import self_report
from harness.rundir.parts import PartWriter, part_prefix
from harness.rundir.records import SCHEMA
from harness.workload.plan import StepPlan, build_request_plan


class _Context:
    """State the locust user classes reach (one step at a time per process; reset for every step)."""

    def __init__(self) -> None:
        self.driver: StepDriver | None = None
        self.ids: Iterator[int] = itertools.count()
        self.release = gevent.event.Event()
        self.on_signal: Callable[[], None] | None = None
        self._signals_installed = False

    def reset(self, driver: StepDriver | None, ids: Iterator[int]) -> None:
        """Start a new step in this process."""
        self.driver, self.ids = driver, ids
        self.release = gevent.event.Event()

    def require(self) -> StepDriver:
        """The current step's driver."""
        if self.driver is None:
            raise RuntimeError("no step set up in this process")
        return self.driver

    def install_signals(self) -> None:
        """SIGINT/SIGTERM call the current step's handler (installed once per process)."""
        if self._signals_installed:
            return
        self._signals_installed = True
        for sig in (signal.SIGINT, signal.SIGTERM):
            gevent.signal_handler(sig, self._signalled)

    def _signalled(self) -> None:
        if self.on_signal is not None:
            self.on_signal()


CTX = _Context()


class HarnessClosedUser(User):
    """A closed-loop user: sends its planned requests back to back (plus think time)."""

    wait_time = constant(3600)

    @task
    def run_closed(self) -> None:
        """Run one user of the plan, then wait to be stopped."""
        driver = CTX.require()
        driver.closed_user(next(CTX.ids))
        CTX.release.wait()


class HarnessOpenUser(User):
    """The open-loop dispatcher of one process: sends arrivals at their planned times."""

    wait_time = constant(3600)

    @task
    def run_open(self) -> None:
        """Dispatch this process's arrivals, then wait to be stopped."""
        CTX.require().open_dispatch()
        CTX.release.wait()


class StepShape(LoadTestShape):
    """One step: ``users`` users, all started at once, until the step has ended."""

    def __init__(self, users: int, ended: Callable[[], bool]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.users = users
        self.ended = ended

    def tick(self) -> tuple[int, float] | None:
        """All users at once while the step runs; None (stop) once it has ended."""
        return None if self.ended() else (self.users, float(max(self.users, 1)))


def make_plan(spec: StepSpec) -> StepPlan:
    """The step's plan (raises LoadConfigError / TraceLoadError for bad input)."""
    return build_request_plan(spec.workload, spec.level, step_index=spec.step_index, calibration=spec.tokenizer,
                      max_model_len=spec.max_model_len, drill=spec.drill, drill_phase=spec.drill_phase,
                      classes=spec.classes, duration_override_s=spec.duration_override_s,
                      requests_override=spec.requests_override,
                      base_dir=Path(spec.trace_base_dir) if spec.trace_base_dir else None)


class _NoPandas(importlib.abc.MetaPathFinder):
    """Refuses ``pandas`` while pyarrow first looks for it (see :func:`warm_pyarrow`)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        """Raise for pandas; leave every other module to the normal finders."""
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is kept out of the load runner")


def warm_pyarrow() -> None:
    """Do pyarrow's one-time set-up now, not mid-step. Its first conversion imports pandas (seconds on a busy
    host, and the runner never needs it): keep pandas out while pyarrow decides it is not installed."""
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        pa.Table.from_pylist([], schema=SCHEMA)
    finally:
        sys.meta_path.remove(finder)


def make_writer(spec: StepSpec) -> PartWriter:
    """The step's part writer (writes run in gevent's thread pool, off the hub)."""
    warm_pyarrow()
    pool = gevent.get_hub().threadpool
    return PartWriter(Path(spec.records_dir), part_prefix(spec.step_index, spec.step_label, spec.drill,
                                                          spec.drill_phase),
                      flush_every=spec.flush_every, flush_interval_s=spec.flush_interval_s,
                      writer_fn=pool.apply)


def flush_loop(writer: PartWriter, stop: gevent.event.Event) -> None:
    """Flush buffered records once they are older than the flush interval, until ``stop`` is set."""
    while not stop.wait(0.25):
        if writer.due():
            writer.flush()


def on_signals(handler: Callable[[], None]) -> None:
    """Route SIGINT/SIGTERM to ``handler`` for the current step."""
    CTX.on_signal = handler
    CTX.install_signals()


def hard_limit(spec: StepSpec, plan: StepPlan) -> float | None:
    """Seconds after which a step that has not ended is stopped (None for request-bounded steps)."""
    if plan.duration_s is None:
        return None
    return plan.duration_s + spec.drain_timeout_s + 30.0


def quiet_logging() -> None:
    """Warnings to stderr (the runner's log); locust's own chatter off."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("locust").setLevel(logging.ERROR)
    sys.setswitchinterval(0.001)  # the parquet writer thread must not hold the hub back for 5 ms


def run_local(spec: StepSpec) -> RunnerOutcome:
    """One process: a locust LocalRunner whose users run the step."""
    plan = make_plan(spec)
    writer = make_writer(spec)
    driver = StepDriver(spec, plan, writer.add_row)
    if plan.mode == "closed":
        driver.prepare(list(range(plan.users)))
    CTX.reset(driver, itertools.count())
    user_cls: type[User] = HarnessClosedUser if plan.mode == "closed" else HarnessOpenUser
    users = plan.users if plan.mode == "closed" else 1
    env = Environment(user_classes=[user_cls], shape_class=StepShape(users, driver.finished.is_set))
    runner = env.create_local_runner()
    flusher = gevent.spawn(flush_loop, writer, driver.finished)
    on_signals(lambda: driver.halt("interrupted", interrupted=True))
    start_ns, start_wall = time.perf_counter_ns(), time.time_ns()
    runner.start_shape()
    if not driver.wait_finished(hard_limit(spec, plan)):
        driver.halt("runner time limit", error="the step did not end within duration + drain + 30 s")
        driver.wait_finished(None)
    CTX.release.set()
    runner.quit()
    flusher.join(timeout=30.0)  # never kill it: it may be inside a part write
    writer.flush()
    CTX.on_signal = None
    end_ns, end_wall = time.perf_counter_ns(), time.time_ns()
    p50, p99, lag_max = lag_stats_ms(driver.lags_ns)
    wall_s = ((driver.end_ns or end_ns) - (driver.t0_ns or start_ns)) / 1e9
    me = self_report(rank=0, pid=os.getpid(), requests=driver.requests, cpu_s=driver.cpu_s, wall_s=wall_s,
                     lags_ns=driver.lags_ns, plan=plan)
    return RunnerOutcome(
        start_ns=driver.t0_ns or start_ns, end_ns=driver.end_ns or end_ns,
        start_wall_ns=driver.wall0_ns or start_wall, end_wall_ns=end_wall, requests=driver.requests,
        errors=sum(driver.errors_by_kind.values()), errors_by_kind=dict(driver.errors_by_kind),
        records_written=writer.written, interrupted=driver.interrupted, error=driver.error,
        cpu_s=driver.cpu_s, wall_s=wall_s, processes=1,
        max_process_cpu_percent=round(100 * driver.cpu_s / wall_s, 1) if wall_s > 0 else None,
        send_lag_ms_p50=p50, send_lag_ms_p99=p99, send_lag_ms_max=lag_max, warnings=plan.warnings,
        parts=[str(p) for p in writer.parts], ended_early=driver.ended_early, workers=[me],
        plan_fingerprint=me.plan_fingerprint)
