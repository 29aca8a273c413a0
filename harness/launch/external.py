"""The ``external`` launcher: servers the harness does not manage (an arm's ``server.base_url``).

Starting one is attaching to it: nothing is run, no pid file is written and no container is labelled, so
``harness cleanup`` never sees it, and an interrupted run leaves it running. :meth:`ExternalServer.stop` only lets
go of it. The user's ``restart_command`` / ``clear_cache_command`` (the only ways the harness acts on such a
server, and only when a drill asks) run through :func:`run_command`: ``/bin/sh -c`` in a new session, bounded by
``command_timeout_s`` (then the command's process group is killed), cancelled by Ctrl-C, the command line (its
secrets masked in every form, :mod:`harness.secrets.shell`) and its output redacted into the arm's log and the
last lines kept as the server's log tail.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

from harness.config.external import ExternalServer as ServerConfig
from harness.engines.spec import LaunchSpec, MetricsEndpoint
from harness.launch.base import LaunchContext
from harness.secrets.redact import Redactor
from harness.secrets.shell import mask_shell_command

TAIL_LINES = 200
OUTPUT_TAIL_BYTES = 1 << 20  # at most this much of a command's output is kept (the end of it)
POLL_S = 0.1


@dataclass(frozen=True)
class CommandResult:
    """How one user command ended."""

    ok: bool
    message: str
    seconds: float


class ExternalServer:
    """An existing deployment, driven but never managed by the harness."""

    external = True

    def __init__(self, spec: LaunchSpec, config: ServerConfig, log_path: Path, redactor: Redactor) -> None:
        self.spec = spec
        self.config = config
        self._log_path = log_path
        self._redact = redactor
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)

    @property
    def base_url(self) -> str:
        return self.config.base_url

    def alive(self) -> bool:
        """Always True: the harness has no process to watch (a server that stops answering fails the requests)."""
        return True

    def exit_description(self) -> str | None:
        return None

    def log_tail(self, lines: int = 40) -> list[str]:
        """The last output lines of the user's commands (the server's own log is not the harness's to read)."""
        return list(self._tail)[-lines:]

    def stop(self, timeout_s: float = 20.0) -> None:
        """Let go of the server; it keeps running."""

    def identity(self) -> dict[str, str]:
        return {"launcher": "external", "base_url": self.config.base_url, "metrics_url": self.config.metrics}

    def run_command(self, which: str, cancel: threading.Event | None = None) -> CommandResult:
        """Run ``restart_command`` or ``clear_cache_command`` (``which``); never raises for the command's failure."""
        command = getattr(self.config, which)
        if not command:
            return CommandResult(False, f"no server.{which} is set", 0.0)
        return run_command(command, which, self.config.command_timeout_s, self._log_path, self._redact,
                           self._tail, cancel)


def run_command(command: str, what: str, timeout_s: float, log_path: Path, redact: Redactor,
                tail: deque[str], cancel: threading.Event | None = None) -> CommandResult:
    """Run a shell command to its end, its timeout or ``cancel``; output (redacted) goes to ``log_path``."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out:
        try:
            proc = subprocess.Popen(["/bin/sh", "-c", command], stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            return CommandResult(False, f"{what} could not start: {exc.strerror or exc}", 0.0)
        ended = _wait(proc, started + timeout_s, cancel)
        if ended is None:
            _kill_group(proc)
        lines = _output_lines(out, redact)
    seconds = time.monotonic() - started
    _append_log(log_path, [f"[harness] {what} ({redact(mask_shell_command(command))}):", *lines])
    tail.extend(lines)
    if ended is None:
        why = "interrupted" if cancel is not None and cancel.is_set() else f"timed out after {timeout_s:g} s"
        return CommandResult(False, f"{what} {why}", seconds)
    if ended != 0:
        last = f"; last output: {lines[-1][:200]}" if lines else ""
        return CommandResult(False, f"{what} exited with code {ended}{last}", seconds)
    return CommandResult(True, f"{what} done in {seconds:.1f} s", seconds)


def _wait(proc: subprocess.Popen[bytes], deadline: float, cancel: threading.Event | None) -> int | None:
    """The exit code, or None at the deadline or on cancel."""
    while True:
        code = proc.poll()
        if code is not None:
            return code
        if time.monotonic() >= deadline or (cancel is not None and cancel.is_set()):
            return None
        time.sleep(POLL_S)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """End the command this module started (its own session), and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)


def _output_lines(out: IO[bytes], redact: Redactor) -> list[str]:
    """The end of the output, decoded and redacted line by line."""
    out.seek(0, os.SEEK_END)
    size = out.tell()
    out.seek(max(0, size - OUTPUT_TAIL_BYTES))
    text = out.read().decode("utf-8", "replace")
    return [redact(line) for line in text.splitlines()]


def _append_log(path: Path, lines: list[str]) -> None:
    with contextlib.suppress(OSError):  # a log that cannot be written must not fail the drill
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as log:
            log.write("\n".join(lines) + "\n")


def scrape_target(base_url: str, spec: LaunchSpec, config: ServerConfig | None) -> tuple[str, list[MetricsEndpoint]]:
    """Where the scraper reads metrics: the launched server's endpoints, or an external arm's ``metrics_url``
    (in the format the engine's first endpoint has)."""
    if config is None or config.metrics_url is None:  # the engine's own endpoints, under the server's URL
        return base_url, spec.metrics
    parts = urlsplit(config.metrics)
    fmt = spec.metrics[0].format if spec.metrics else "prometheus"
    return f"{parts.scheme}://{parts.netloc}", [MetricsEndpoint(path=parts.path or "/", format=fmt)]


class ExternalLauncher:
    """Attaches to an arm's existing deployment."""

    kind = "external"

    def __init__(self, config: ServerConfig) -> None:
        self.config = config

    def start(self, spec: LaunchSpec, ctx: LaunchContext) -> ExternalServer:
        """Nothing is started: the server is reached where the arm says."""
        return ExternalServer(spec, self.config, ctx.log_path, Redactor(ctx.secrets))

    def cleanup(self, run_id: str | None = None) -> list[str]:
        """Nothing to remove: external servers are never the harness's."""
        return []
