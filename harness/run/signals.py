"""Ctrl-C and SIGTERM turn into a cancel event: the current step stops, servers are stopped, records flushed.

A second signal while stopping raises :class:`ForcedStop` (a :class:`KeyboardInterrupt`) so a stuck shutdown can
still be forced: the orchestrator then kills the arm's server at once, journals the arm as interrupted and exits 4
with the ``--resume`` command, as for the first signal. Later signals are ignored, so the forced stop (bounded)
itself is not cut short.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class ForcedStop(KeyboardInterrupt):
    """The second Ctrl-C / SIGTERM: stop now, without waiting for a graceful shutdown."""


@contextmanager
def cancel_on_signals(cancel: threading.Event) -> Iterator[threading.Event]:
    """Within the block, SIGINT/SIGTERM set ``cancel`` (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield cancel
        return
    forced: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        if not cancel.is_set():
            cancel.set()
        elif not forced:  # once: a third signal must not cut the forced stop short
            forced.append(signum)
            raise ForcedStop
    old_int = signal.signal(signal.SIGINT, handler)
    old_term = signal.signal(signal.SIGTERM, handler)
    try:
        yield cancel
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
