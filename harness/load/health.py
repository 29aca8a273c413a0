"""Client health per step: the load generator's CPU use, send lag and first-token delay, and whether it was saturated.

A gevent process is one thread: near 100% of a core it can no longer send on time or read chunks as they
arrive, and its latencies include its own queueing. A step is flagged ``saturated`` when any load process
ran above ``saturation_cpu_percent`` of a core, the send lag's p99 exceeded ``saturation_lag_ms``, or the p99 of the
first-token client delay (a first token's arrival to its parsing: how long the client left it in its buffers,
:func:`delay_percentiles`) exceeded ``first_token_delay_p99_ms``; the note says which, with the numbers. Each load
process (a local worker or a remote machine's) gets its own figures and flag
(:class:`~harness.schema.summary.LoadProcessHealth`), and the step records how many processes and machines drove it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from harness.config.load import FIRST_TOKEN_DELAY_P99_MS
from harness.load.spec import WorkerReport
from harness.schema.intervals import Percentiles
from harness.schema.summary import ClientHealth, LoadProcessHealth


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100) of unsorted values; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return float(ordered[min(rank, len(ordered)) - 1])


def lag_stats_ms(lags_ns: Sequence[int]) -> tuple[float | None, float | None, float | None]:
    """(p50, p99, max) of send lags in milliseconds."""
    if not lags_ns:
        return None, None, None
    ms = [v / 1e6 for v in lags_ns]
    return percentile(ms, 50), percentile(ms, 99), max(ms)


def delay_percentiles(delays_ms: Sequence[float]) -> Percentiles | None:
    """p50/p95/p99 (nearest rank), mean and count of first-token client delays in ms; None when there are none."""
    if not delays_ms:
        return None
    p50, p95, p99 = (_round(percentile(delays_ms, q)) for q in (50, 95, 99))
    return Percentiles(p50=p50, p95=p95, p99=p99, mean=_round(sum(delays_ms) / len(delays_ms)), count=len(delays_ms))


def assess(*, cpu_s: float, wall_s: float, max_process_cpu_percent: float | None, lag_p50_ms: float | None,
           lag_p99_ms: float | None, processes: int, cpu_limit: float = 90.0,
           lag_limit_ms: float = 20.0, workers: Sequence[WorkerReport] = (),
           first_token_delay: Percentiles | None = None,
           delay_limit_ms: float = FIRST_TOKEN_DELAY_P99_MS) -> ClientHealth:
    """The step's :class:`ClientHealth` with a sentence when the client was saturated."""
    cpu_percent = round(100.0 * cpu_s / wall_s, 1) if wall_s > 0 else None
    per_process = [process_health(w, cpu_limit, lag_limit_ms) for w in sorted(workers, key=lambda w: w.rank)]
    reasons: list[str] = []
    if max_process_cpu_percent is not None and max_process_cpu_percent >= cpu_limit:
        reasons.append(f"a load process used {max_process_cpu_percent:.0f}% of a core (limit {cpu_limit:g}%)")
    if lag_p99_ms is not None and lag_p99_ms >= lag_limit_ms:
        reasons.append(f"send lag p99 was {lag_p99_ms:.1f} ms (limit {lag_limit_ms:g} ms)")
    delay_p99 = first_token_delay.p99 if first_token_delay is not None else None
    if delay_p99 is not None and delay_p99 >= delay_limit_ms:
        reasons.append(f"first tokens waited in the client p99 {delay_p99:.1f} ms between arrival and parsing "
                       f"(limit {delay_limit_ms:g} ms)")
    note = None
    if reasons:
        note = ("load generator saturated: " + "; ".join(reasons) + f" with {processes} process(es); its "
                "latencies include client delay. Raise the scenario's load.processes (or set processes: auto) "
                "or add machines (load.remote_workers).")
    hosts = {w.host for w in workers}
    return ClientHealth(cpu_percent=cpu_percent, send_lag_ms_p50=_round(lag_p50_ms),
                        send_lag_ms_p99=_round(lag_p99_ms), saturated=bool(reasons), note=note,
                        processes=processes, machines=max(1, len(hosts)),
                        remote_processes=sum(1 for w in workers if w.remote), per_process=per_process)


def process_health(worker: WorkerReport, cpu_limit: float, lag_limit_ms: float) -> LoadProcessHealth:
    """One load process's figures, flagged saturated by the same limits as the step."""
    cpu = round(100.0 * worker.cpu_s / worker.wall_s, 1) if worker.wall_s > 0 else None
    lag = worker.send_lag_ms_p99
    saturated = (cpu is not None and cpu >= cpu_limit) or (lag is not None and lag >= lag_limit_ms)
    return LoadProcessHealth(rank=worker.rank, host=worker.host, remote=worker.remote, requests=worker.requests,
                             cpu_percent=cpu, send_lag_ms_p50=_round(worker.send_lag_ms_p50),
                             send_lag_ms_p99=_round(lag), saturated=saturated)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
