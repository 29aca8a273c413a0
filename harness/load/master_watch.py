"""The master's watch over a running distributed step (gevent-patched processes only).

It waits for every worker's ``DONE`` and, meanwhile: relays a sequential look's stop (the stop file the
supervising process writes) to every worker as ``END_SENDING`` within :data:`POLL_S`; declares a worker lost when
nothing at all came from it (records, beats, locust's heartbeats) for :data:`LOST_AFTER_S`; and at the step's time
limit names each worker that has not ended with what it last reported. Any of these (and Ctrl-C) halts every
worker; the ``DONE`` of those not lost then has :data:`DONE_WAIT_S` to arrive.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from harness.load import protocol as msg_type
from harness.load.master_gate import WorkerGate

POLL_S = 0.1
LOST_AFTER_S = 5.0
DONE_WAIT_S = 10.0


@dataclass
class WatchResult:
    """How the wait ended."""

    error: str | None = None
    stop_relayed_at: float | None = None  # monotonic time the look's stop went to the workers


def watch(gate: WorkerGate, done: dict[int, Any], all_done: Any, stopping: Any, limit_s: float | None,
          stop_path: str | None) -> WatchResult:
    """Wait for every worker's ``DONE`` (``done`` by rank; ``all_done`` set when complete)."""
    started = time.monotonic()
    halted_at: float | None = None
    result = WatchResult()
    gone: set[str] = set()  # lost workers: their report is not waited for
    while not all_done.is_set():
        now = time.monotonic()
        if halted_at is None:
            if stop_path and result.stop_relayed_at is None and os.path.exists(stop_path):
                gate.broadcast(msg_type.END_SENDING, {"reason": "sequential look"})
                result.stop_relayed_at = now
            pending = [cid for cid, rank in gate.ranks.items() if rank not in done]
            lost = [cid for cid in pending if now - gate.last_seen.get(cid, started) > LOST_AFTER_S]
            reason = None
            if stopping.is_set():
                reason = "interrupted"
            elif lost:
                gone.update(lost)
                reason = result.error = (f"load worker(s) lost: nothing came from them for {LOST_AFTER_S:g} s ("
                                         + "; ".join(gate.progress(c, now) for c in sorted(lost)) + ")")
            elif limit_s is not None and now - started > limit_s:
                reason = result.error = ("the step did not end within duration + drain + 30 s; still running: "
                                         + "; ".join(gate.progress(c, now) for c in sorted(pending)))
            if reason is not None:
                gate.broadcast(msg_type.HALT, {"reason": reason[:500], "interrupted": stopping.is_set()})
                halted_at = now
        elif all(rank in done for cid, rank in gate.ranks.items() if cid not in gone):
            break
        elif now - halted_at > DONE_WAIT_S:
            missing = [gate.named(cid) for cid, rank in gate.ranks.items() if rank not in done]
            if missing and result.error is None:
                result.error = f"load worker(s) {', '.join(missing)} sent no report after the step was halted"
            break
        all_done.wait(POLL_S)
    return result
