"""An arm's ``server`` section: a server the harness does not manage (``engine.launcher: external``).

The harness reaches it at ``base_url``, scrapes ``metrics_url`` (default ``<base_url>/metrics``), waits until it
is ready within ``readiness_timeout_s`` and runs the user's ``restart_command`` / ``clear_cache_command`` only
when a drill asks for a restart or a cache loss. It never starts, stops or changes the server otherwise, except
that ``cold_start: engine-reset`` (opt-in) asks the engine to empty its caches before the arm.

The scenario's rules across arms (every arm has a ``server`` under that launcher, no two arms name the same server)
are in :mod:`harness.config.external_arms`; :func:`server_key` says when two URLs are the same server.
"""

from __future__ import annotations

import shlex
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from harness.config.base import StrictModel
from harness.secrets.shell import shell_secret_values

_DEFAULT_PORTS = {"http": 80, "https": 443}
_LOOPBACK_NAMES = {"localhost": "127.0.0.1", "::1": "127.0.0.1", "[::1]": "127.0.0.1"}
MAX_COMMAND_LEN = 4096


def _check_url(value: str, what: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{what} must be an http:// or https:// URL with a host, e.g. http://10.0.0.5:8000")
    if parts.username or parts.password:
        raise ValueError(f"{what} must not carry credentials (user:password@): they would be recorded")
    if parts.query or parts.fragment:
        raise ValueError(f"{what} must not have a query string or fragment")
    try:
        parts.port  # noqa: B018 (raises on a port that is not a number)
    except ValueError:
        raise ValueError(f"{what} has an invalid port") from None
    return value.rstrip("/")


class ExternalServer(StrictModel):
    """Where an existing deployment answers, and the optional commands drills may run against it."""

    base_url: str = Field(min_length=8, max_length=2048, description="OpenAI-compatible root, e.g. "
                          "http://10.0.0.5:8000 (no /v1)")
    metrics_url: str | None = Field(default=None, max_length=2048, description="Prometheus (vLLM) or JSON "
                                    "(TensorRT-LLM) metrics; default <base_url>/metrics")
    readiness_timeout_s: float | None = Field(default=None, gt=0, le=7200, description="how long to wait for "
                                              "/v1/models to list the model; default engine.readiness_timeout_s")
    restart_command: str | None = Field(default=None, min_length=1, max_length=MAX_COMMAND_LEN,
                                        description="shell command that restarts the server (restart drill)")
    clear_cache_command: str | None = Field(default=None, min_length=1, max_length=MAX_COMMAND_LEN,
                                            description="shell command that empties its offload tiers "
                                            "(cache_loss drill)")
    command_timeout_s: float = Field(default=600.0, gt=0, le=7200, description="limit for each command")
    shared_url: bool = Field(default=False, description="declare that an earlier arm names the same server "
                             "(otherwise refused: arms must be distinct servers)")
    cold_start: Literal["as-found", "engine-reset"] = Field(
        default="as-found", description="engine-reset: before the arm, empty the server's prefix cache and CPU "
        "offload tier through vLLM's own POST /reset_prefix_cache?reset_external=true (the server must run with "
        "VLLM_SERVER_DEV_MODE=1), then prove it with a canary prompt; refused for engines without that endpoint "
        "and for arms with a disk tier, which the reset keeps (harness/run/cold_reset.py)")

    @field_validator("base_url")
    @classmethod
    def _base_url(cls, value: str) -> str:
        return _check_url(value, "base_url")

    @field_validator("metrics_url")
    @classmethod
    def _metrics_url(cls, value: str | None) -> str | None:
        return None if value is None else _check_url(value, "metrics_url")

    @model_validator(mode="after")
    def _commands_parse(self) -> ExternalServer:
        for name in ("restart_command", "clear_cache_command"):
            command = getattr(self, name)
            if command is not None:
                try:
                    shlex.split(command)
                except ValueError as exc:
                    raise ValueError(f"{name}: not a shell command line ({exc})") from None
        return self

    @property
    def metrics(self) -> str:
        """The metrics URL after its default."""
        return self.metrics_url or f"{self.base_url}/metrics"


def server_key(url: str) -> tuple[str, str, int]:
    """What makes two URLs the same server: scheme, host (loopback names as one) and port."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    host = _LOOPBACK_NAMES.get(host, host)
    return parts.scheme, host, parts.port or _DEFAULT_PORTS.get(parts.scheme, 0)


def command_secret_values(server: ExternalServer | None) -> list[str]:
    """The secrets on the server's commands (``--token X``, ``curl -u user:X``, ``DB_PASSWORD=X cmd``...: the rule
    is in :mod:`harness.secrets.shell`), for the run's redactor."""
    if server is None:
        return []
    out: list[str] = []
    for command in (server.restart_command, server.clear_cache_command):
        if command:
            out += shell_secret_values(command)
    return out
