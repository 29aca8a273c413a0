"""``run_step``: run one load step in a locust subprocess and supervise it from a plain synchronous thread.

The parent never imports locust or gevent (they patch the standard library). It writes the step spec to a
file, hands it to a warm runner process (:mod:`harness.load.runners`), waits with bounded polls, relays
``cancel`` as SIGINT (then SIGTERM, then SIGKILL to the runner's process group), and reads back the runner's
small JSON outcome. If the runner died without one, the outcome is rebuilt from the record parts it had
flushed. The step's first-token client delays (arrival to parse, per request) are read back from its record parts,
whichever process wrote them, for the client-health check (:mod:`harness.load.health`). Server failures never
raise: they are error records, and a server that refuses every connection ends the step early with ``error`` set.
Bad workload input raises :class:`LoadConfigError`.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness.config.load import FIRST_TOKEN_DELAY_P99_MS
from harness.config.steps import StepLevel
from harness.config.workload import WorkloadSpec
from harness.host.tempdirs import step_dir
from harness.load.health import assess, delay_percentiles
from harness.load.runners import POOL, Runner
from harness.load.spec import ClientKind, RunnerOutcome, StepSpec
from harness.rundir.parts import count_rows, find_parts, part_prefix
from harness.schema.intervals import Percentiles
from harness.schema.summary import ClientHealth
from harness.workload.plan import LoadConfigError, build_request_plan
from harness.workload.tokens import TokenCalibration

START_ALLOWANCE_S = 120.0  # a cold runner's imports on a busy host, the plan, worker connections
CANCEL_GRACE_S = 8.0
FORCED_GRACE_S = 1.5  # after a second Ctrl-C, the runner's last chance to flush its records
POLL_S = 0.05
LOG_TAIL_LINES = 15
log = logging.getLogger(__name__)


@dataclass
class StepRun:
    """One step to run (the orchestrator fills it from the scenario and the arm)."""

    base_url: str
    served_model: str
    workload: WorkloadSpec
    level: StepLevel
    step_index: int  # -1 = warm-up, -2.. = drills
    step_label: str
    arm: str
    records_dir: Path
    request_timeout_s: float
    stream_idle_timeout_s: float
    drain_timeout_s: float
    max_model_len: int | None
    tokenizer: TokenCalibration | None
    drill: str | None = None
    drill_phase: str | None = None
    duration_override_s: float | None = None
    requests_override: int | None = None
    classes: list[str] | None = None  # only these request classes (None: all)
    processes: int = 1  # local load processes (locust master + workers when > 1)
    remote_workers: int = 0  # workers on other machines to wait for (see docs/load.md)
    master_bind_host: str = "127.0.0.1"
    master_port: int = 0  # 0: any free port (remote workers need a fixed one)
    worker_wait_s: float = 60.0
    client: ClientKind = "gevent"
    trace_base_dir: Path | None = None  # relative trace paths are resolved against this (the scenario's dir)
    flush_every: int = 512
    flush_interval_s: float = 2.0
    saturation_cpu_percent: float = 90.0
    saturation_lag_ms: float = 20.0
    first_token_delay_p99_ms: float = FIRST_TOKEN_DELAY_P99_MS  # client-health budget (scenario load section)
    # Sequential steps: at each look (seconds after the step started) ``on_look`` is asked whether the step's
    # decision is settled; a reason ends the step's sending early (in-flight requests drain as usual).
    looks_s: list[float] = field(default_factory=list)
    on_look: Callable[[float], str | None] | None = None
    attempt: int = 1  # this step's attempt in the run (see harness.rundir.attempts); written into every record


@dataclass
class StepOutcome:
    """What happened in one step (clocks as in :mod:`harness.rundir.records`)."""

    start_ns: int
    end_ns: int
    start_wall_ns: int
    end_wall_ns: int
    requests: int
    errors: int
    client: ClientHealth
    interrupted: bool
    error: str | None
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    parts: list[Path] = field(default_factory=list)
    cpu_s: float = 0.0  # load-generator CPU seconds over the step (all its processes)
    processes: int = 1
    ended_early: bool = False
    stop_reason: str | None = None
    harness_failure: bool = False  # ``error`` is the load generator's own failure (it died, could not write records)
    first_token_delay_ms: Percentiles | None = None  # first tokens' arrival to parse in the client (None: no record)


def _spec(req: StepRun, outcome_path: Path) -> StepSpec:
    return StepSpec(
        base_url=req.base_url, served_model=req.served_model, workload=req.workload, level=req.level,
        step_index=req.step_index, step_label=req.step_label, arm=req.arm, records_dir=str(req.records_dir),
        request_timeout_s=req.request_timeout_s, stream_idle_timeout_s=req.stream_idle_timeout_s,
        drain_timeout_s=req.drain_timeout_s, max_model_len=req.max_model_len, tokenizer=req.tokenizer,
        drill=req.drill, drill_phase=req.drill_phase, duration_override_s=req.duration_override_s,
        requests_override=req.requests_override, classes=req.classes,
        trace_base_dir=str(req.trace_base_dir) if req.trace_base_dir else None, client=req.client,
        processes=req.processes, remote_workers=req.remote_workers, master_bind_host=req.master_bind_host,
        master_port=req.master_port, worker_wait_s=req.worker_wait_s, flush_every=req.flush_every,
        flush_interval_s=req.flush_interval_s, outcome_path=str(outcome_path),
        stop_path=str(outcome_path.with_name("stop")) if req.on_look is not None and req.looks_s else None,
        saturation_cpu_percent=req.saturation_cpu_percent, saturation_lag_ms=req.saturation_lag_ms,
        attempt=req.attempt)


def _time_limit(req: StepRun, duration_s: float | None) -> float | None:
    if duration_s is None:
        return None
    extra = req.worker_wait_s if (req.processes > 1 or req.remote_workers) else 0.0
    return START_ALLOWANCE_S + extra + duration_s + req.drain_timeout_s + 10.0


@dataclass
class _Watch:
    """How the wait for a step ended."""

    cancelled: bool = False  # cancel was set (or Ctrl-C reached this thread)
    keyboard: bool = False  # Ctrl-C reached this thread: re-raised once the step is stopped and flushed
    clean: bool = False  # the runner ended the step by itself and can run another
    stop_reason: str | None = None  # a sequential look settled the step


def _look(req: StepRun | None, looks: list[float], elapsed: float, outcome_path: Path, watch: _Watch) -> None:
    """Ask the step's look callback once each look time has passed; a reason writes the stop file."""
    if req is None or req.on_look is None or watch.stop_reason is not None:
        return
    while looks and elapsed >= looks[0]:
        looks.pop(0)
        try:
            reason = req.on_look(elapsed)
        except Exception as exc:  # a look must never break the step: it just does not stop it
            log.warning("%s step %s: sequential look failed: %s", req.arm, req.step_label, exc)
            reason = None
        if reason:
            watch.stop_reason = reason
            outcome_path.with_name("stop").write_text(reason, encoding="utf-8")
            looks.clear()


def _supervise(runner: Runner, outcome_path: Path, cancel: threading.Event | None,
               limit_s: float | None, req: StepRun | None = None) -> _Watch:
    """Wait for the step's outcome; on cancel, Ctrl-C or time limit: SIGINT, then SIGTERM, then SIGKILL."""
    started = time.monotonic()
    stop_sent: float | None = None
    watch = _Watch()
    looks = sorted(req.looks_s) if req is not None else []
    while runner.alive() and not outcome_path.exists():
        try:
            now = time.monotonic()
            if stop_sent is None:
                _look(req, looks, now - started, outcome_path, watch)
            if stop_sent is None and ((cancel is not None and cancel.is_set()) or
                                      (limit_s is not None and now - started > limit_s)):
                watch.cancelled = cancel is not None and cancel.is_set()
                runner.signal(signal.SIGINT)
                stop_sent = now
            elif stop_sent is not None and now - stop_sent > CANCEL_GRACE_S:
                runner.signal(signal.SIGTERM if now - stop_sent < 2 * CANCEL_GRACE_S else signal.SIGKILL)
            time.sleep(POLL_S)
        except KeyboardInterrupt:
            if watch.keyboard or stop_sent is not None or (cancel is not None and cancel.is_set()):
                # a second Ctrl-C (the first set ``cancel``): stop (nearly) at once
                _force(runner, outcome_path)
                raise
            watch.keyboard = watch.cancelled = True
            runner.signal(signal.SIGINT)
            stop_sent = time.monotonic()
    watch.clean = stop_sent is None and runner.alive()
    return watch


def _force(runner: Runner, outcome_path: Path) -> None:
    """A forced stop: the runner, already asked to stop, gets ``FORCED_GRACE_S`` to flush its records, then SIGKILL."""
    try:
        runner.signal(signal.SIGTERM)
        deadline = time.monotonic() + FORCED_GRACE_S
        while runner.alive() and not outcome_path.exists() and time.monotonic() < deadline:
            time.sleep(POLL_S)
    finally:
        runner.signal(signal.SIGKILL)


def run_step(req: StepRun, cancel: threading.Event | None = None) -> StepOutcome:
    """Run one step; returns when it has ended (by itself, by ``cancel``, or because the server is gone).

    Raises :class:`LoadConfigError` (or ``TraceLoadError``) for a workload that cannot be planned; never for
    server trouble. A ``KeyboardInterrupt`` that reaches this thread stops the step like ``cancel`` (bounded,
    records flushed) and is then re-raised; set ``cancel`` from a SIGINT handler to get the outcome instead.
    """
    plan = build_request_plan(req.workload, req.level, step_index=req.step_index, calibration=req.tokenizer,
                      max_model_len=req.max_model_len, drill=req.drill, drill_phase=req.drill_phase,
                      classes=req.classes, duration_override_s=req.duration_override_s,
                      requests_override=req.requests_override, base_dir=req.trace_base_dir)
    req.records_dir.mkdir(parents=True, exist_ok=True)
    prefix = part_prefix(req.step_index, req.step_label, req.drill, req.drill_phase)
    before = set(find_parts(req.records_dir, prefix))
    if req.remote_workers and req.master_port:
        POOL.note_remote(req.master_bind_host, req.master_port, req.remote_workers, req.worker_wait_s)
    runner = POOL.take()
    log_start = runner.log_size()
    # owned and labelled (pid + run id, 0700): `harness cleanup` finds the ones a killed harness left
    with step_dir(run_id=req.records_dir.parent.parent.name) as tmp:
        spec_path, outcome_path = Path(tmp, "spec.json"), Path(tmp, "outcome.json")
        spec_path.write_text(_spec(req, outcome_path).model_dump_json(), encoding="utf-8")
        start_ns, start_wall = time.perf_counter_ns(), time.time_ns()
        with contextlib.suppress(OSError):  # a dead runner is noticed below
            runner.send(f"RUN {spec_path}")
        watch = _supervise(runner, outcome_path, cancel, _time_limit(req, plan.duration_s), req)
        result = _read_outcome(outcome_path)
    tail = "\n".join(runner.log_text(log_start).splitlines()[-LOG_TAIL_LINES:])
    if watch.clean and result is not None:
        POOL.give_back(runner)
    else:
        POOL.discard(runner)
    if watch.keyboard:
        raise KeyboardInterrupt
    cancelled = watch.cancelled
    if result is not None and result.bad_input:
        raise LoadConfigError(result.error or "the workload could not be planned")
    new_parts = sorted(set(find_parts(req.records_dir, prefix)) - before)
    if result is None:
        requests, errors = count_rows(new_parts)
        now, wall = time.perf_counter_ns(), time.time_ns()
        reason = "was interrupted" if cancelled else "died"
        result = RunnerOutcome(start_ns=start_ns, end_ns=now, start_wall_ns=start_wall, end_wall_ns=wall,
                               requests=requests, errors=errors, interrupted=cancelled, harness_failure=True,
                               error=f"the load generator {reason} without an outcome" + (f": {tail}" if tail else ""))
    delay = delay_percentiles(first_token_delays_ms(new_parts))
    health = assess(cpu_s=result.cpu_s, wall_s=result.wall_s, max_process_cpu_percent=result.max_process_cpu_percent,
                    lag_p50_ms=result.send_lag_ms_p50, lag_p99_ms=result.send_lag_ms_p99,
                    processes=result.processes, cpu_limit=req.saturation_cpu_percent,
                    lag_limit_ms=req.saturation_lag_ms, workers=result.workers,
                    first_token_delay=delay,
                    delay_limit_ms=req.first_token_delay_p99_ms)
    health.plan_fingerprint = result.plan_fingerprint
    health.layout_note = "; ".join(result.layout_notes) or None  # journaled with the step, shown in the reports
    warnings = list(result.warnings) + ([health.note] if health.note else [])
    for warning in warnings:
        log.warning("%s step %s: %s", req.arm, req.step_label, warning)
    return StepOutcome(start_ns=result.start_ns, end_ns=result.end_ns, start_wall_ns=result.start_wall_ns,
                       end_wall_ns=result.end_wall_ns, requests=result.requests, errors=result.errors,
                       client=health, interrupted=result.interrupted or cancelled, error=result.error,
                       errors_by_kind=result.errors_by_kind, warnings=warnings, parts=new_parts,
                       cpu_s=result.cpu_s, processes=result.processes, ended_early=result.ended_early,
                       stop_reason=watch.stop_reason if result.ended_early else None,
                       harness_failure=result.harness_failure and result.error is not None,
                       first_token_delay_ms=delay)


DELAY_COLUMNS = ["first_token_ns", "first_token_parsed_ns"]


def first_token_delays_ms(parts: list[Path]) -> list[float]:
    """Per request in ``parts`` with both times: ``first_token_parsed_ns - first_token_ns`` in ms (a part that
    cannot be read, or that predates the parse time, gives none)."""
    delays: list[float] = []
    for part in parts:
        try:
            table = pq.read_table(part, columns=DELAY_COLUMNS)
        except (OSError, pa.ArrowException, KeyError, ValueError):
            continue
        diff = pc.drop_null(pc.subtract(table.column("first_token_parsed_ns"), table.column("first_token_ns")))
        delays += [v / 1e6 for v in diff.to_pylist()]
    return delays


def _read_outcome(path: Path) -> RunnerOutcome | None:
    try:
        return RunnerOutcome.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
