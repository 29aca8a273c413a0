"""The launcher contract shared by the Docker and local-process launchers."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from harness.engines.spec import LaunchSpec


class LaunchError(Exception):
    """A server that could not be started or never became ready; carries the engine's last log lines."""

    def __init__(self, message: str, *, phase: str = "start", log_tail: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.phase = phase
        self.log_tail = log_tail or []


@dataclass
class LaunchContext:
    """Where the launcher writes and how it labels what it creates."""

    run_id: str
    log_path: Path          # server log copied/streamed here (redacted)
    work_dir: Path          # rendered config files go here
    secrets: list[str] = field(default_factory=list)  # values to redact from logs


class RunningServer(Protocol):
    """A started server."""

    spec: LaunchSpec

    @property
    def base_url(self) -> str:
        """Where to reach it."""
        ...

    def alive(self) -> bool:
        """True while the server process/container runs."""
        ...

    def exit_description(self) -> str | None:
        """How it ended (exit code, OOM), or None while alive."""
        ...

    def log_tail(self, lines: int = 40) -> list[str]:
        """The last log lines (redacted)."""
        ...

    def stop(self, timeout_s: float = 20.0) -> None:
        """Stop and remove; idempotent; copies final logs first."""
        ...

    def identity(self) -> dict[str, str]:
        """What to record: container id / pid, image digest."""
        ...


class Launcher(Protocol):
    """Starts servers of one kind."""

    kind: str

    def start(self, spec: LaunchSpec, ctx: LaunchContext) -> RunningServer:
        """Start the server (not waiting for readiness); raise LaunchError when it cannot start."""
        ...

    def cleanup(self, run_id: str | None = None) -> list[str]:
        """Remove anything a (possibly interrupted) run left behind; returns what was removed."""
        ...
