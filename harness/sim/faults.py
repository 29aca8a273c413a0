"""Fault injection for the reliability tests (set by flags at start, changed at run time by ``POST /admin/faults``).

- ``crash_after_s``: the process dies (exit status 1, no cleanup, open streams cut) that many seconds after
  start-up (after the update, when set at run time).
- ``crash_after_requests``: the process dies as soon as that many requests have finished (any status).
- ``stall_after_tokens``: streams stop sending after that many tokens and stay open (no ``[DONE]``) until the
  client goes away; the engine keeps computing them.
- ``error_rate``: that fraction of completion requests is answered HTTP 500 with a JSON error body.
- ``malformed_sse_rate``: that fraction of streamed token chunks is replaced by a malformed SSE line.
- ``disk_read_slowdown``: disk-tier reads take this many times longer.

``--fail-start`` (refuse to start) and cache loss (``POST /admin/cache-loss``) live in the CLI and server.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
from dataclasses import asdict, dataclass, fields
from typing import Any

MALFORMED_SSE = b'data: {"id": "harness-sim-malformed", "choices": [{"delta": {"content": \n\n'


class FaultError(ValueError):
    """An invalid fault specification."""


@dataclass
class Faults:
    crash_after_s: float | None = None
    crash_after_requests: int | None = None
    stall_after_tokens: int | None = None
    error_rate: float = 0.0
    malformed_sse_rate: float = 0.0
    disk_read_slowdown: float = 1.0

    def validate(self) -> None:
        for name in ("error_rate", "malformed_sse_rate"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise FaultError(f"{name} must be within [0, 1] (got {v})")
        if self.disk_read_slowdown <= 0:
            raise FaultError("disk_read_slowdown must be positive")
        for name in ("crash_after_s", "crash_after_requests", "stall_after_tokens"):
            v = getattr(self, name)
            if v is not None and v < 0:
                raise FaultError(f"{name} must not be negative")


_NUMERIC: dict[str, type] = {
    "crash_after_s": float,
    "crash_after_requests": int,
    "stall_after_tokens": int,
    "error_rate": float,
    "malformed_sse_rate": float,
    "disk_read_slowdown": float,
}


def parse_fault_update(data: Any) -> dict[str, Any]:
    """Validate a ``POST /admin/faults`` body: a JSON object with some of the fault fields."""
    if not isinstance(data, dict):
        raise FaultError("expected a JSON object")
    known = {f.name for f in fields(Faults)}
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key not in known:
            raise FaultError(f"unknown fault {key!r}; known: {', '.join(sorted(known))}")
        if value is None:
            out[key] = {"error_rate": 0.0, "malformed_sse_rate": 0.0, "disk_read_slowdown": 1.0}.get(key)
            continue
        kind = _NUMERIC[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise FaultError(f"{key} must be a number")
        if kind is int and int(value) != value:
            raise FaultError(f"{key} must be an integer")
        out[key] = kind(value)
    return out


def crash(reason: str) -> None:
    """Die abruptly, like an engine process that crashed."""
    print(f"harness-sim: simulated crash ({reason})", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(1)


class FaultController:
    """Holds the active faults and decides, per request / chunk, whether to inject one."""

    def __init__(self, faults: Faults, seed: int = 0) -> None:
        faults.validate()
        self.faults = faults
        self._rng = random.Random(seed ^ 0x5EED)
        self._finished = 0
        self._timer: asyncio.TimerHandle | None = None

    def arm(self) -> None:
        """Start the crash timer, if any (needs a running loop)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        delay = self.faults.crash_after_s
        if delay is not None:
            self._timer = asyncio.get_running_loop().call_later(delay, crash, f"crash_after_s={delay}")

    def update(self, changes: dict[str, Any]) -> None:
        merged = Faults(**{**asdict(self.faults), **changes})
        merged.validate()
        self.faults = merged
        if "crash_after_s" in changes:
            self.arm()
        if self.faults.crash_after_requests is not None and self._finished >= self.faults.crash_after_requests:
            crash(f"crash_after_requests={self.faults.crash_after_requests}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self.faults)

    def should_error(self) -> bool:
        rate = self.faults.error_rate
        return rate > 0 and self._rng.random() < rate

    def should_malform(self) -> bool:
        rate = self.faults.malformed_sse_rate
        return rate > 0 and self._rng.random() < rate

    def request_finished(self) -> None:
        self._finished += 1
        limit = self.faults.crash_after_requests
        if limit is not None and self._finished >= limit:
            crash(f"crash_after_requests={limit}")
