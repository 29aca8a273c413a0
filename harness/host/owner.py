"""Who owns a run's servers: the harness process (host, uid, pid and the process's start time), and whether it
still runs.

A pid alone can be recycled; pid + start time names one process. A process that exited but was not reaped yet
(a zombie) counts as gone.

The start time is kept twice. Seconds since the epoch (psutil's ``create_time``) is what a person can read and what
any OS gives, but psutil computes it as the kernel's boot time (``btime`` in ``/proc/stat``) plus the start's
clock ticks since boot, and ``btime`` moves whenever the wall clock is stepped (NTP, a VM resumed from a pause or a
snapshot). Compared in epoch seconds, every process recorded before such a step looks gone after it: each
watchdog ends its process and every live run looks stale. So on Linux the identity also carries the start in
seconds since boot (``/proc/PID/stat`` field 22, which no clock change touches) and the boot's id
(``/proc/sys/kernel/random/boot_id``, so a number from before a reboot never matches a process of this boot);
when both are known and the boot is this one they decide, and epoch seconds are the fallback (records from an
older harness, other systems).
"""

from __future__ import annotations

import functools
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import psutil

START_TOLERANCE_S = 1.0  # psutil's epoch start times are rounded to the clock tick
SINCE_BOOT_TOLERANCE_S = 0.05  # the same start read twice differs by nothing; a tick is 0.01 s
BOOT_ID_PATH = Path("/proc/sys/kernel/random/boot_id")


@functools.lru_cache(maxsize=1)
def boot_id() -> str:
    """This boot's id (Linux), or "" where the system has none."""
    try:
        return BOOT_ID_PATH.read_text(encoding="ascii").strip()[:64]
    except (OSError, UnicodeDecodeError):
        return ""


@functools.lru_cache(maxsize=1)
def _clock_ticks() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, AttributeError):
        return 0


def since_boot(pid: int) -> float | None:
    """When process ``pid`` started, in seconds since boot (Linux ``/proc``), or None (gone, or no ``/proc``)."""
    ticks = _clock_ticks()
    if ticks <= 0:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read(4096)
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2:].split()  # the name in parentheses may hold spaces; field 3 on after it
    try:
        return int(fields[19]) / ticks  # field 22, starttime
    except (IndexError, ValueError):
        return None


class ProcessRef(NamedTuple):
    """One process: its pid, its start in epoch seconds and, where known, in seconds since the boot named."""

    pid: int
    start: float
    since_boot: float | None = None
    boot: str = ""


@dataclass(frozen=True)
class Owner:
    """One process on one host."""

    host: str
    uid: int
    pid: int
    start: float  # psutil create_time (seconds since the epoch)
    since_boot: float | None = None  # the same start in seconds since boot (Linux), immune to clock steps
    boot: str = ""  # the boot those seconds count from

    def text(self) -> str:
        """``"pid:start"`` (``"pid:start:since_boot:boot_id"`` where known): how it travels in an environment
        variable or a label."""
        tail = f":{self.since_boot:.2f}:{self.boot}" if self.since_boot is not None and self.boot else ""
        return f"{self.pid}:{self.start:.3f}{tail}"

    def ref(self) -> ProcessRef:
        """The process, for :func:`process_alive`."""
        return ProcessRef(self.pid, self.start, self.since_boot, self.boot)


def this_host() -> str:
    """The host name recorded with every owner."""
    return socket.gethostname()


def ref_of(pid: int) -> ProcessRef:
    """Process ``pid`` as it runs now (raises ``psutil.Error`` when it does not)."""
    start = psutil.Process(pid).create_time()
    boot = since_boot(pid)
    return ProcessRef(pid, start, boot, boot_id() if boot is not None else "")


def current() -> Owner:
    """This process, read once per process (a forked child reads its own): texts of it compare equal for the
    process's whole life, also across a clock step that moves psutil's epoch start."""
    return _owner_of(os.getpid())


@functools.lru_cache(maxsize=4)
def _owner_of(pid: int) -> Owner:
    me = ref_of(pid)
    return Owner(host=this_host(), uid=os.getuid(), pid=me.pid, start=me.start, since_boot=me.since_boot,
                 boot=me.boot)


def parse_pid_start(text: str) -> ProcessRef | None:
    """``"pid:start"`` or ``"pid:start:since_boot:boot_id"`` -> the process, or None when malformed."""
    parts = text.split(":")
    if len(parts) not in (2, 4):
        return None
    try:
        pid, start = int(parts[0]), float(parts[1])
        boot_s = float(parts[2]) if len(parts) == 4 else None
    except ValueError:
        return None
    if pid <= 0 or not 0 < start < float("inf"):
        return None
    if boot_s is not None and not 0 <= boot_s < float("inf"):
        return None
    boot = parts[3][:64] if len(parts) == 4 else ""
    return ProcessRef(pid, start, boot_s if boot else None, boot)


def _same_start(proc: psutil.Process, start: float, boot_s: float | None, boot: str) -> bool:
    if boot_s is not None and boot and boot == boot_id():
        now = since_boot(proc.pid)
        if now is not None:
            return abs(now - boot_s) < SINCE_BOOT_TOLERANCE_S
    return abs(proc.create_time() - start) < START_TOLERANCE_S


def process_alive(pid: int, start: float, since_boot_s: float | None = None, boot: str = "") -> bool:
    """The process ``pid`` runs and is the one that started at ``start`` (seconds since the epoch; or at
    ``since_boot_s`` of boot ``boot`` where given: see the module docstring), not a recycled pid, not a zombie."""
    try:
        proc = psutil.Process(pid)
        return (_same_start(proc, start, since_boot_s, boot) and proc.is_running()
                and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False
