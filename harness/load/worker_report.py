"""What each load process reports about its share of a step: its host, CPU, send lag and the plan it ran.

The one-process runner reports itself; each worker of a master sends the same fields in its ``harness_done``
message. The plan fingerprint (:func:`harness.workload.plan.plan_fingerprint` over the first
:data:`FINGERPRINT_PER_STREAM` requests of every stream) is computed off the step's clock: by the one-process
runner after the step, by each worker before it (in its ``harness_ready`` answer): a worker whose plan differs from
the master's (another harness version, another trace file), or that reports none, is refused before it sends.
"""

from __future__ import annotations

import re
import socket
from typing import Any

from harness.load.health import lag_stats_ms
from harness.load.spec import WorkerReport
from harness.workload.plan import StepPlan, plan_fingerprint

FINGERPRINT_PER_STREAM = 8
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def clean_host(name: object) -> str:
    """A host name as reported by a worker, reduced to letters, digits, ``.-_`` (64 characters at most)."""
    return _UNSAFE.sub("_", str(name))[:64]


def host_name() -> str:
    """This machine's name, cleaned."""
    return clean_host(socket.gethostname())


def fingerprint(plan: StepPlan) -> str:
    """The step plan's fingerprint as every load process computes it."""
    return plan_fingerprint(plan, FINGERPRINT_PER_STREAM)


def self_report(*, rank: int, pid: int, requests: int, cpu_s: float, wall_s: float, lags_ns: list[int],
                plan: StepPlan, plan_fingerprint: str | None = None) -> WorkerReport:
    """This process's report over its share of the step (``plan_fingerprint``: already computed for ``plan``)."""
    p50, p99, _ = lag_stats_ms(lags_ns)
    return WorkerReport(rank=rank, host=host_name(), pid=pid, requests=requests, cpu_s=round(cpu_s, 4),
                        wall_s=round(wall_s, 4), send_lag_ms_p50=p50, send_lag_ms_p99=p99,
                        plan_fingerprint=plan_fingerprint or fingerprint(plan))


def from_message(data: dict[str, Any], local_pids: set[int], here: str) -> WorkerReport | None:
    """A worker's report from its ``harness_done`` message (None when malformed); ``remote`` unless it is one
    of the master's own local workers."""
    try:
        report = WorkerReport.model_validate({k: data.get(k) for k in WorkerReport.model_fields if k in data} |
                                             {"host": clean_host(data.get("host", ""))})
    except ValueError:
        return None
    return report.model_copy(update={"remote": not (report.pid in local_pids and report.host == here)})
