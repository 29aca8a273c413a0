"""Who owns a run's servers: the harness process (host, uid, pid and the process's start time), and whether it
still runs.

A pid alone can be recycled; pid + start time names one process. A process that exited but was not reaped yet
(a zombie) counts as gone.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

import psutil

START_TOLERANCE_S = 1.0  # psutil's start times are rounded to the clock tick


@dataclass(frozen=True)
class Owner:
    """One process on one host."""

    host: str
    uid: int
    pid: int
    start: float  # psutil create_time (seconds since the epoch)

    def text(self) -> str:
        """``"pid:start"``: how it travels in an environment variable or a label."""
        return f"{self.pid}:{self.start:.3f}"


def this_host() -> str:
    """The host name recorded with every owner."""
    return socket.gethostname()


def current() -> Owner:
    """This process."""
    return Owner(host=this_host(), uid=os.getuid(), pid=os.getpid(), start=psutil.Process().create_time())


def parse_pid_start(text: str) -> tuple[int, float] | None:
    """``"pid:start"`` -> (pid, start), or None when malformed."""
    pid_text, _, start_text = text.partition(":")
    try:
        pid, start = int(pid_text), float(start_text)
    except ValueError:
        return None
    if pid <= 0 or not start > 0 or start == float("inf"):
        return None
    return pid, start


def process_alive(pid: int, start: float) -> bool:
    """The process ``pid`` runs and is the one that started at ``start`` (not a recycled pid, not a zombie)."""
    try:
        proc = psutil.Process(pid)
        return (abs(proc.create_time() - start) < START_TOLERANCE_S and proc.is_running()
                and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False
