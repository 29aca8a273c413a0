"""Bandwidth queues: the PCIe link directions and the disk.

A :class:`Link` serves transfer jobs one after another (FIFO) at ``bytes_per_s`` with a fixed per-job
latency, so concurrent transfers contend: a job submitted while the link is busy starts when the previous
one ends. Job time = ``latency_s + bytes / bytes_per_s``. Host-to-device (loads, promotions) and device-to-host
(stores) are separate links, as PCIe is full duplex.

A :class:`DiskQueue` is the fs tier's device: one FIFO queue whose job time for ``n`` files of ``bytes`` in
total is ``(bytes / bytes_per_s + ceil(n / threads) * latency_s) * slowdown`` -- bandwidth is shared by all
threads, per-file latency overlaps across ``threads`` (``n_read_threads`` / ``n_write_threads``). ``extra``, when set,
gives each submitted job one more factor (the seeded disk-read tail of :mod:`harness.sim.noise`).
All times are modelled seconds.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable


class _FifoDevice:
    """FIFO bookkeeping shared by links and disks: when the device is free, job/byte/busy counters, open jobs."""

    def __init__(self) -> None:
        self.free_at = 0.0
        self.jobs = 0
        self.bytes = 0
        self.busy_s = 0.0
        self._ends: deque[float] = deque()

    def _enqueue(self, start: float, duration: float, nbytes: int) -> tuple[float, float]:
        end = start + duration
        self.free_at = end
        self.jobs += 1
        self.bytes += nbytes
        self.busy_s += duration
        self._ends.append(end)
        return start, end

    def active_jobs(self, now: float) -> int:
        """Jobs submitted and not yet finished at ``now``."""
        ends = self._ends
        while ends and ends[0] <= now:
            ends.popleft()
        return len(ends)


class Link(_FifoDevice):
    """A FIFO transfer link."""

    def __init__(self, bytes_per_s: float, latency_s: float = 0.0) -> None:
        if bytes_per_s <= 0:
            raise ValueError("bandwidth must be positive")
        super().__init__()
        self.bytes_per_s = bytes_per_s
        self.latency_s = latency_s

    def submit(self, now: float, nbytes: int, not_before: float = 0.0) -> tuple[float, float]:
        """Queue a job of ``nbytes``; returns its (start, end) in modelled seconds."""
        start = max(now, not_before, self.free_at)
        return self._enqueue(start, self.latency_s + nbytes / self.bytes_per_s, nbytes)


class DiskQueue(_FifoDevice):
    """The fs tier's device: shared bandwidth, per-file latency overlapped over ``threads``."""

    def __init__(self, bytes_per_s: float, latency_s: float, threads: int) -> None:
        if bytes_per_s <= 0 or threads <= 0:
            raise ValueError("bandwidth and threads must be positive")
        super().__init__()
        self.bytes_per_s = bytes_per_s
        self.latency_s = latency_s
        self.threads = threads
        self.slowdown = 1.0
        self.extra: Callable[[], float] | None = None

    def job_time(self, n_files: int, nbytes: int) -> float:
        waves = -(-n_files // self.threads)
        return (nbytes / self.bytes_per_s + waves * self.latency_s) * self.slowdown

    def submit(self, now: float, n_files: int, nbytes: int) -> tuple[float, float]:
        """Queue a job; returns its (start, end)."""
        duration = self.job_time(n_files, nbytes)
        if self.extra is not None:
            duration *= self.extra()
        return self._enqueue(max(now, self.free_at), duration, nbytes)
