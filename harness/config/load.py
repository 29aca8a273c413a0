"""The scenario's ``load`` section: how many load processes and machines drive each step.

``processes`` is a number of local load processes (1: one process; more: a locust master with that many local
workers) or ``auto``: start at ``min_processes`` and, after a step whose client health was saturated, double the
local workers for the next step, up to ``max_processes`` and the host's cores. ``remote_workers`` more workers on
other machines (``harness load-worker --master HOST:PORT``) join the master at ``master_bind_host:master_port``;
they need a fixed port. ``saturation_cpu_percent`` / ``saturation_lag_ms`` / ``first_token_delay_p99_ms`` are the
client-health limits (a step over any of them is flagged saturated).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from harness.config.base import StrictModel

MAX_PROCESSES = 256
_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}"
                       r"[A-Za-z0-9])?)*$")
ANY_HOST = ("*", "0.0.0.0", "::")
FIRST_TOKEN_DELAY_P99_MS = 20.0  # budget on the first-token client delay (arrival to parse), as saturation_lag_ms


def valid_bind_host(host: str) -> bool:
    """An IP address, a host name, or ``*`` / ``0.0.0.0`` / ``::`` (every interface)."""
    if host in ANY_HOST:
        return True
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return bool(_HOSTNAME.match(host))


class LoadSpec(StrictModel):
    """Load processes and machines for every step of every arm."""

    processes: int | Literal["auto"] = Field(default=1, description="local load processes (1..256), or auto: more "
                                             "after a step whose load generator was saturated")
    min_processes: int = Field(default=1, ge=1, le=MAX_PROCESSES, description="with processes: auto, the first "
                               "step's local processes")
    max_processes: int | None = Field(default=None, ge=1, le=MAX_PROCESSES, description="with processes: auto, "
                                      "the most local processes (the host's cores at most; default: the cores)")
    remote_workers: int = Field(default=0, ge=0, le=1000, description="workers on other machines the master waits "
                                "for (each runs `harness load-worker --master HOST:PORT`)")
    master_bind_host: str = Field(default="127.0.0.1", max_length=253, description="address the master listens on "
                                  "(0.0.0.0 for workers on other machines)")
    master_port: int | None = Field(default=None, ge=1, le=65535, description="the master's port; required with "
                                    "remote_workers (default: any free port)")
    worker_wait_s: float = Field(default=60.0, gt=0, le=3600, description="how long each step waits for its "
                                 "workers to connect")
    saturation_cpu_percent: float = Field(default=90.0, ge=0, le=100_000, description="a load process above this "
                                          "share of a core is saturated (0 flags every step)")
    saturation_lag_ms: float = Field(default=20.0, ge=0, le=3_600_000, description="a send-lag p99 above this "
                                     "is saturation (0 flags every step)")
    first_token_delay_p99_ms: float = Field(default=FIRST_TOKEN_DELAY_P99_MS, ge=0, le=3_600_000, description=(
        "a p99 of the first-token client delay (a first token's arrival to its parsing by the load generator) above "
        "this is saturation: the client was too busy to read promptly (0 flags every step)"))

    @field_validator("processes")
    @classmethod
    def _processes_in_range(cls, value: int | str) -> int | str:
        if isinstance(value, int) and not 1 <= value <= MAX_PROCESSES:
            raise ValueError(f"should be a number from 1 to {MAX_PROCESSES}, or auto (got {value})")
        return value

    @field_validator("master_bind_host")
    @classmethod
    def _bind_host(cls, value: str) -> str:
        if not valid_bind_host(value):
            raise ValueError(f"should be an IP address, a host name or 0.0.0.0 (got {value[:80]!r})")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> LoadSpec:
        auto = self.processes == "auto"
        if not auto and (self.min_processes != 1 or self.max_processes is not None):
            raise ValueError("min_processes / max_processes apply only to processes: auto")
        if self.max_processes is not None and self.max_processes < self.min_processes:
            raise ValueError(f"max_processes ({self.max_processes}) is below min_processes ({self.min_processes})")
        if self.remote_workers and self.master_port is None:
            raise ValueError(f"remote_workers: {self.remote_workers} needs a fixed master_port (the port the "
                             "workers' `harness load-worker --master HOST:PORT` connects to)")
        if self.processes == 1 and not self.remote_workers:
            unused = self.changed_fields(["master_bind_host", "master_port", "worker_wait_s"])
            if unused:
                verb, them = ("configures", "it") if len(unused) == 1 else ("configure", "them")
                raise ValueError(f"{', '.join(unused)} {verb} the locust master, which one local process without "
                                 f"remote_workers does not start: remove {them}, or set processes / remote_workers")
        return self

    @property
    def auto(self) -> bool:
        """True for ``processes: auto``."""
        return self.processes == "auto"

    def describe(self, cores: int) -> str:
        """The layout in words, e.g. ``auto: 1 to 2 local processes (2 cores) + 2 remote workers via ...``."""
        if isinstance(self.processes, int):
            text = f"{self.processes} local process" + ("es" if self.processes > 1 else "")
        else:
            cap = min(self.max_processes or cores, cores)
            text = (f"auto: {min(self.min_processes, cap)} to {cap} local processes, doubled after a saturated "
                    f"step (host: {cores} cores)")
        if self.remote_workers:
            text += (f" + {self.remote_workers} remote worker(s) joining the master at "
                     f"{self.master_bind_host}:{self.master_port} (each waits up to {self.worker_wait_s:g} s)")
        return text
