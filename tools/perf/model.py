"""What one client-capacity run measured, the shared workload, and the small statistics over it.

Every tool (the harness's load path, a peer) runs the same :class:`Workload` against the same simulator and
is measured the same way: the load window is the client's own first send to its last completed response
(``perf_counter_ns``), completed streamed tokens are the output tokens of requests that finished without
error, and client CPU is the tool's process tree over that window (:mod:`tools.perf.procs`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Workload:
    """Closed loop: ``concurrency`` streams, ``requests`` in all, fixed prompt and output lengths."""

    concurrency: int
    requests: int
    prompt_words: int = 128
    output_tokens: int = 256

    def __post_init__(self) -> None:
        if self.concurrency < 1 or self.requests < 1 or self.prompt_words < 1 or self.output_tokens < 1:
            raise ValueError(f"workload figures must be positive: {self}")


@dataclass(frozen=True)
class ClientRun:
    """One tool's run of one workload."""

    tool: str
    workload: Workload
    completed: int
    errors: int
    tokens: int  # completed streamed tokens (client's count)
    window_s: float
    cpu_s: float  # client process tree CPU over the window
    reported_cpu_s: float | None = None  # the tool's own CPU figure, where it has one
    server_tokens: int | None = None  # tokens the simulator says it sent to completed requests
    ttft_errors_ms: list[float] = field(default_factory=list)
    ttft_sent_ns: list[int] = field(default_factory=list)  # the server's first-token send time, per error
    run_queue_wait_s: float | None = None  # client threads runnable but not running (other work on its core)
    note: str = ""

    @property
    def tokens_per_s(self) -> float:
        """Completed streamed tokens per second of the load window."""
        return self.tokens / self.window_s if self.window_s > 0 else math.nan

    @property
    def cpu_s_per_1k_tokens(self) -> float:
        """Client CPU seconds per 1000 completed tokens."""
        return 1000 * self.cpu_s / self.tokens if self.tokens else math.nan

    @property
    def tokens_per_cpu_s(self) -> float:
        """Completed tokens per client CPU second (the efficiency figure the goal compares)."""
        return self.tokens / self.cpu_s if self.cpu_s > 0 else math.nan


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation (numpy's default); NaN when empty."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    data = sorted(values)
    if not data:
        return math.nan
    pos = (len(data) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def ttft_errors(first_token_ns: dict[str, int], sent_ns: dict[str, int]) -> tuple[list[float], list[int]]:
    """|client first-token time - server first-token send time| in ms, joined on the response id, with the
    server's send times (same order)."""
    pairs = [(abs(t - sent_ns[rid]) / 1e6, sent_ns[rid]) for rid, t in first_token_ns.items() if rid in sent_ns]
    return [e for e, _ in pairs], [s for _, s in pairs]


@dataclass(frozen=True)
class BurstSplit:
    """TTFT errors of first tokens the server sent in bursts (with many others) versus alone."""

    burst_size: int
    in_bursts: list[float]
    others: list[float]


def burst_split(errors_ms: Sequence[float], sent_ns: Sequence[int], window_ms: float = 2.0,
                burst_size: int = 16) -> BurstSplit:
    """Split errors by how many first tokens the server sent within ``window_ms`` of each one."""
    if len(errors_ms) != len(sent_ns):
        raise ValueError("errors and send times must pair up")
    order = sorted(range(len(sent_ns)), key=lambda i: sent_ns[i])
    times = [sent_ns[i] for i in order]
    half = int(window_ms * 1e6 / 2)
    in_bursts: list[float] = []
    others: list[float] = []
    lo = hi = 0
    for pos, i in enumerate(order):
        while times[lo] < times[pos] - half:
            lo += 1
        while hi < len(times) and times[hi] <= times[pos] + half:
            hi += 1
        (in_bursts if hi - lo >= burst_size else others).append(errors_ms[i])
    return BurstSplit(burst_size, in_bursts, others)
