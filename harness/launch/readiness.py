"""Wait until a server is ready: ``GET /v1/models`` answers 200 and lists the served model (``/health`` only means
the process is alive). Bounded in time; gives up early when the server dies, with its last log lines."""

from __future__ import annotations

import threading
import time

import httpx

from harness.launch.base import LaunchError, RunningServer

POLL_INTERVAL_S = 0.25


def model_listed(body: object, model: str) -> bool:
    """True when an OpenAI ``/v1/models`` body lists ``model``."""
    if not isinstance(body, dict):
        return False
    data = body.get("data")
    if not isinstance(data, list):
        return False
    return any(isinstance(m, dict) and m.get("id") == model for m in data)


def wait_ready(server: RunningServer, timeout_s: float, *, cancel: threading.Event | None = None) -> float:
    """Block until ready; returns seconds waited. Raises :class:`LaunchError` on death, timeout or cancel."""
    spec = server.spec
    url = server.base_url + spec.readiness_path
    started = time.monotonic()
    deadline = started + timeout_s
    last = "no answer yet"
    with httpx.Client(timeout=httpx.Timeout(5.0, connect=2.0), trust_env=False) as client:
        while True:
            if cancel is not None and cancel.is_set():
                raise LaunchError("interrupted while waiting for readiness", phase="readiness",
                                  log_tail=server.log_tail())
            if not server.alive():
                how = server.exit_description() or "exited"
                raise LaunchError(f"server {how} before it became ready", phase="start",
                                  log_tail=server.log_tail())
            try:
                resp = client.get(url)
                if resp.status_code == 200:
                    try:
                        body = resp.json()
                    except ValueError:
                        body = None
                    if model_listed(body, spec.served_model_name):
                        return time.monotonic() - started
                    last = f"{spec.readiness_path} answered 200 without model {spec.served_model_name!r}"
                else:
                    last = f"{spec.readiness_path} answered HTTP {resp.status_code}"
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
            if time.monotonic() >= deadline:
                raise LaunchError(f"not ready after {timeout_s:g} s (last: {last})", phase="readiness",
                                  log_tail=server.log_tail())
            time.sleep(POLL_INTERVAL_S)
