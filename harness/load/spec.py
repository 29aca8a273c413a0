"""The JSON contract between :func:`harness.load.run_step` and the locust subprocess that runs the step.

``StepSpec`` goes in (a file for the local runner; a message for remote workers), ``RunnerOutcome`` comes back
(a small JSON file written by the runner when the step ends, even when it was interrupted).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.config.steps import StepLevel
from harness.config.workload import WorkloadSpec
from harness.workload.tokens import TokenCalibration

ClientKind = Literal["gevent", "httpx"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class StepSpec(_Model):
    """Everything a runner (and each of its workers) needs to run one step."""

    base_url: str
    served_model: str
    workload: WorkloadSpec
    level: StepLevel
    step_index: int
    step_label: str
    arm: str
    records_dir: str
    request_timeout_s: float = Field(gt=0)
    stream_idle_timeout_s: float = Field(gt=0)
    drain_timeout_s: float = Field(ge=0)
    max_model_len: int | None = None
    tokenizer: TokenCalibration | None = None
    drill: str | None = None
    drill_phase: str | None = None
    duration_override_s: float | None = None
    requests_override: int | None = None
    classes: list[str] | None = None
    trace_base_dir: str | None = None
    client: ClientKind = "gevent"
    processes: int = Field(default=1, ge=1, le=256)
    remote_workers: int = Field(default=0, ge=0, le=10_000)
    master_bind_host: str = "127.0.0.1"
    master_port: int = Field(default=0, ge=0, le=65535)
    worker_wait_s: float = Field(default=60.0, gt=0)
    flush_every: int = Field(default=512, ge=1)
    flush_interval_s: float = Field(default=2.0, gt=0)
    outcome_path: str | None = None
    stop_path: str | None = None  # a sequential step ends its sending early once this file exists
    saturation_cpu_percent: float = Field(default=90.0, ge=0)  # 0 flags every step (a test's forced saturation)
    saturation_lag_ms: float = Field(default=20.0, ge=0)
    attempt: int = Field(default=1, ge=1)  # written into every record (see harness.rundir.attempts)


class WorkerReport(_Model):
    """One load process's own figures over its share of a step (the master gets one from each worker)."""

    rank: int = Field(ge=0)
    host: str = Field(default="", max_length=64)  # the host name the worker reported (sanitised)
    pid: int = 0
    remote: bool = False  # not started by this step's master
    requests: int = Field(default=0, ge=0)
    cpu_s: float = Field(default=0.0, ge=0)
    wall_s: float = Field(default=0.0, ge=0)
    send_lag_ms_p50: float | None = None
    send_lag_ms_p99: float | None = None
    plan_fingerprint: str | None = Field(default=None, max_length=64)


class RunnerOutcome(_Model):
    """What the runner reports when the step ends (clocks as in :mod:`harness.rundir.records`)."""

    start_ns: int
    end_ns: int
    start_wall_ns: int
    end_wall_ns: int
    requests: int = 0
    errors: int = 0
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    records_written: int = 0
    interrupted: bool = False
    error: str | None = None
    bad_input: bool = False  # the workload could not be planned (error says why)
    harness_failure: bool = False  # ``error`` is the load generator's own failure (not the server's)
    cpu_s: float = 0.0
    wall_s: float = 0.0
    processes: int = 1
    max_process_cpu_percent: float | None = None
    send_lag_ms_p50: float | None = None
    send_lag_ms_p99: float | None = None
    send_lag_ms_max: float | None = None
    warnings: list[str] = Field(default_factory=list)
    layout_notes: list[str] = Field(default_factory=list)  # about the step's processes (also in ``warnings``)
    parts: list[str] = Field(default_factory=list)
    ended_early: bool = False  # sending ended at a sequential look (the step's decision was settled)
    workers: list[WorkerReport] = Field(default_factory=list)  # each load process (one entry in one-process mode)
    plan_fingerprint: str | None = None  # of the plan the runner ran (harness.workload.plan.plan_fingerprint)
