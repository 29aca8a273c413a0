"""CPU accounting and core pinning for ``make perf``: how much CPU a process tree spent over a time window.

:class:`TreeCpuSampler` samples the CPU seconds (user + system) of a process and all its descendants every
``interval_s`` on a daemon thread, stamped with ``time.perf_counter_ns`` (CLOCK_MONOTONIC, the clock of the
simulator's ground truth), and :meth:`TreeCpuSampler.cpu_between` interpolates the total at the two ends of
a window. The same method measures the harness's load runner and a peer tool, so start-up imports, dataset
preparation and result writing outside the load window count for neither.

:func:`cpu_plan` splits the cores this process may use between the server and the client, and :func:`pin`
applies it (``os.sched_setaffinity``), where the platform has it.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

SAMPLE_INTERVAL_S = 0.05


BOOST_NICE = -10


@dataclass(frozen=True)
class CpuPlan:
    """Which cores the server and the client get (``None``: not pinned) and their nice value (``None``: as is)."""

    server: frozenset[int] | None
    client: frozenset[int] | None
    note: str
    nice: int | None = None

    def place(self, pid: int, role: str) -> bool:
        """Pin ``pid``'s process tree to the ``role``'s cores (``server`` or ``client``) and set its nice value."""
        return pin(pid, self.server if role == "server" else self.client, nice=self.nice)


def cpu_plan(boost: bool = True) -> CpuPlan:
    """First core for the server, the others for the client (both unpinned on one core or without affinity).

    With ``boost`` and the right to (root), server and clients run at nice -10, so other work on a shared
    host disturbs the figures less; both tools get the same treatment.
    """
    nice = BOOST_NICE if boost and hasattr(os, "geteuid") and os.geteuid() == 0 else None
    extra = f"; server and clients at nice {nice}" if nice is not None else ""
    if not hasattr(os, "sched_getaffinity"):
        return CpuPlan(None, None, "no CPU affinity on this platform: client and server share the cores" + extra,
                       nice)
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return CpuPlan(None, None, f"one core ({cpus[0]}): client and server share it" + extra, nice)
    server, client = frozenset(cpus[:1]), frozenset(cpus[1:])
    return CpuPlan(server, client, f"server pinned to core {cpus[0]}, client to core(s) "
                                   f"{','.join(str(c) for c in sorted(client))} (sched_setaffinity)" + extra, nice)


def pin(pid: int, cpus: frozenset[int] | None, *, tree: bool = True, nice: int | None = None) -> bool:
    """Pin every thread of ``pid`` (and of its descendants with ``tree``) to ``cpus``; later threads inherit it.

    ``nice`` (when given) is set on every thread too (best effort). False when nothing could be pinned.
    """
    if cpus is None or not hasattr(os, "sched_setaffinity"):
        return False
    try:
        procs = [psutil.Process(pid)]
        if tree:
            procs += procs[0].children(recursive=True)
    except psutil.Error:
        return False
    pinned = False
    for proc in procs:
        try:
            tids = [t.id for t in proc.threads()]
        except psutil.Error:
            continue
        for tid in tids:
            try:
                os.sched_setaffinity(tid, set(cpus))
                pinned = True
                if nice is not None:
                    os.setpriority(os.PRIO_PROCESS, tid, nice)
            except OSError:
                continue
    return pinned


def pin_self(cpus: frozenset[int] | None) -> bool:
    """Pin the calling process (all its threads, not its children) to ``cpus``."""
    return pin(os.getpid(), cpus, tree=False)


def thread_waits_s(pid: int) -> dict[int, float]:
    """Per thread of ``pid``: seconds it has been runnable but waiting for a core (``/proc/PID/task/*/schedstat``).

    Time a client could not run because something else held its core: what other work on the host adds to the
    client's measured latencies. Empty where the kernel does not expose it.
    """
    out: dict[int, float] = {}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            out[int(task.name)] = int((task / "schedstat").read_text(encoding="ascii").split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            continue
    return out


def tree_cpu_s(root: psutil.Process, seen: dict[int, float], waits: dict[int, float] | None = None) -> float:
    """CPU seconds of ``root`` and its live descendants; ``seen`` keeps the last figure of exited ones.

    With ``waits``, also records each of their threads' run-queue wait (:func:`thread_waits_s`) in it.
    """
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        procs = []
    for proc in procs:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue
        seen[proc.pid] = times.user + times.system
        if waits is not None:
            waits.update(thread_waits_s(proc.pid))
    return sum(seen.values())


@dataclass
class TreeCpuSampler:
    """Samples a process tree's cumulative CPU seconds on a background thread (bounded by ``max_s``)."""

    pid: int
    interval_s: float = SAMPLE_INTERVAL_S
    max_s: float = 3600.0
    times_ns: list[int] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    wait_s: list[float] = field(default_factory=list)  # cumulative run-queue wait of the tree's threads

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._seen: dict[int, float] = {}
        self._waits: dict[int, float] = {}
        self._root = psutil.Process(self.pid)
        self._thread = threading.Thread(target=self._loop, name=f"cpu-sampler-{self.pid}", daemon=True)

    def _sample(self) -> None:
        total = tree_cpu_s(self._root, self._seen, self._waits)
        self.times_ns.append(time.perf_counter_ns())
        self.cpu_s.append(total)
        self.wait_s.append(sum(self._waits.values()))

    def _loop(self) -> None:
        deadline = time.monotonic() + self.max_s
        while not self._stop.is_set() and time.monotonic() < deadline:
            self._sample()
            self._stop.wait(self.interval_s)

    def start(self) -> TreeCpuSampler:
        """Take a first sample and start sampling."""
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Take a last sample and stop."""
        self._stop.set()
        self._thread.join(timeout=5.0)
        self._sample()

    def cpu_at(self, t_ns: int) -> float:
        """Cumulative CPU seconds at ``t_ns`` (linear between samples, clamped to the sampled span)."""
        return interpolate(self.times_ns, self.cpu_s, t_ns)

    def cpu_between(self, start_ns: int, end_ns: int) -> float:
        """CPU seconds the tree spent between two ``perf_counter_ns`` instants."""
        return max(0.0, self.cpu_at(end_ns) - self.cpu_at(start_ns))

    def wait_between(self, start_ns: int, end_ns: int) -> float | None:
        """Seconds the tree's threads waited for a core between two instants (None where not exposed)."""
        if not any(self.wait_s):
            return None
        waited = interpolate(self.times_ns, self.wait_s, end_ns) - interpolate(self.times_ns, self.wait_s, start_ns)
        return max(0.0, waited)


def interpolate(times_ns: list[int], values: list[float], t_ns: int) -> float:
    """Piecewise-linear value at ``t_ns`` of a sampled non-decreasing series (clamped at both ends)."""
    if not times_ns:
        raise ValueError("no CPU samples were taken")
    i = bisect.bisect_left(times_ns, t_ns)
    if i == 0:
        return values[0]
    if i >= len(times_ns):
        return values[-1]
    t0, t1 = times_ns[i - 1], times_ns[i]
    if t1 == t0:
        return values[i]
    return values[i - 1] + (values[i] - values[i - 1]) * (t_ns - t0) / (t1 - t0)
