"""Wait until a server is ready: ``GET /v1/models`` answers 200 and lists the served model (``/health`` only means
the process is alive). Bounded in time as a whole: each poll is one whole request (headers and body) under a
deadline that never runs past ``timeout_s``, and its body is capped (:data:`~harness.core.net.caps.API_MAX_BYTES`,
decompressed), so a server that drips bytes, sends its headers a byte at a time or answers a gzip bomb is
"not ready" with the reason. Gives up early when the server dies (with its last log lines) or on ``cancel``
(Ctrl-C), within about 0.1 s."""

from __future__ import annotations

import threading
import time

from harness.core.net.bounded import FetchCancelled, FetchError, fetch
from harness.core.net.caps import API_MAX_BYTES
from harness.core.term import safe_text
from harness.launch.base import LaunchError, RunningServer

POLL_INTERVAL_S = 0.25
POLL_DEADLINE_S = 5.0
MIN_POLL_S = 0.05


def model_listed(body: object, model: str) -> bool:
    """True when an OpenAI ``/v1/models`` body lists ``model``."""
    if not isinstance(body, dict):
        return False
    data = body.get("data")
    if not isinstance(data, list):
        return False
    return any(isinstance(m, dict) and m.get("id") == model for m in data)


def _poll(url: str, model: str, path: str, deadline_s: float, cancel: threading.Event | None) -> str | None:
    """None when ready, else what the server answered."""
    try:
        resp = fetch("GET", url, deadline_s=deadline_s, max_body_bytes=API_MAX_BYTES, cancel=cancel)
    except FetchCancelled:
        raise
    except FetchError as exc:
        return str(exc)
    if resp.status != 200:
        return f"{path} answered HTTP {resp.status}"
    try:
        body = resp.json()
    except ValueError:
        body = None
    return None if model_listed(body, model) else f"{path} answered 200 without model {model!r}"


def wait_ready(server: RunningServer, timeout_s: float, *, cancel: threading.Event | None = None) -> float:
    """Block until ready; returns seconds waited. Raises :class:`LaunchError` on death, timeout or cancel."""
    spec = server.spec
    url = server.base_url + spec.readiness_path
    started = time.monotonic()
    deadline = started + timeout_s
    last = "no answer yet"

    def interrupted() -> LaunchError:
        return LaunchError("interrupted while waiting for readiness", phase="readiness", log_tail=server.log_tail())

    while True:
        if cancel is not None and cancel.is_set():
            raise interrupted()
        if not server.alive():
            how = server.exit_description() or "exited"
            raise LaunchError(f"server {how} before it became ready", phase="start", log_tail=server.log_tail())
        remaining = deadline - time.monotonic()
        try:
            answer = _poll(url, spec.served_model_name, spec.readiness_path,
                           max(MIN_POLL_S, min(POLL_DEADLINE_S, remaining)), cancel)
        except FetchCancelled:
            raise interrupted() from None
        if answer is None:
            return time.monotonic() - started
        last = safe_text(answer)[:300]
        if time.monotonic() >= deadline:
            raise LaunchError(f"not ready after {timeout_s:g} s (last: {last})", phase="readiness",
                              log_tail=server.log_tail())
        wait = min(POLL_INTERVAL_S, max(0.0, deadline - time.monotonic()))
        if cancel is not None:
            cancel.wait(wait)
        else:
            time.sleep(wait)
