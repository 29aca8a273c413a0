"""Ctrl-C and SIGTERM turn into a cancel event: the current step stops, servers are stopped, records flushed.

A second signal while stopping raises :class:`KeyboardInterrupt` so a stuck shutdown can still be forced.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def cancel_on_signals(cancel: threading.Event) -> Iterator[threading.Event]:
    """Within the block, SIGINT/SIGTERM set ``cancel`` (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield cancel
        return
    received: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        if cancel.is_set():
            raise KeyboardInterrupt
        cancel.set()

    old_int = signal.signal(signal.SIGINT, handler)
    old_term = signal.signal(signal.SIGTERM, handler)
    try:
        yield cancel
    finally:
        signal.signal(signal.SIGINT, old_int)
        signal.signal(signal.SIGTERM, old_term)
