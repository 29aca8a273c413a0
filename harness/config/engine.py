"""The ``engine`` section: which server to launch (vLLM, TensorRT-LLM or the simulator) and how."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from harness.config.base import StrictModel
from harness.config.env_refs import EnvValue
from harness.config.text import EnvName, Name, PathText, no_control

EngineKind = Literal["vllm", "trtllm", "sim"]
LauncherKind = Literal["docker", "process", "external"]

_DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_BLANK_RE = re.compile(r"\s")
_SHM_RE = re.compile(r"^[0-9]+[bkmgBKMG]?$")
# docker run --gpus: 'all', a count, or device ids ('0,1', 'device=2', GPU UUIDs).
_GPUS_RE = re.compile(r"^(?:all|[0-9]+|(?:device=)?[A-Za-z0-9-]+(?:,[A-Za-z0-9-]+)*)$")
# Fields only the simulator reads, and those only a container gets: refused elsewhere when not at their defaults.
SIM_FIELDS = ("sim_profile", "sim_profile_file", "sim_flavor", "sim_time_scale", "sim_args", "sim_noise", "sim_clock")
CONTAINER_FIELDS = ("gpus", "shm_size", "ipc")


def _apply(names: list[str]) -> str:
    return "applies" if len(names) == 1 else "apply"


def _them(names: list[str]) -> str:
    return "it" if len(names) == 1 else "them"


class SimNoise(StrictModel):
    """Seeded run-to-run variance of the simulator (harness/sim/noise.py; harness/sim/README.md, "Noise").

    Each launch's seed is derived from ``seed`` and the arm's name, so arms (and an A/A re-run of the baseline
    under another name) get different, reproducible draws.
    """

    seed: int = Field(default=0, ge=0, description="scenario noise seed; each launch uses hash(seed, arm name)")
    step_jitter: float = Field(default=0.0, ge=0.0, le=2.0, description="per-step compute-time lognormal sigma")
    run_drift: float = Field(default=0.0, ge=0.0, le=2.0, description="per-launch compute-time lognormal sigma")
    drift_per_hour: float = Field(default=0.0, ge=0.0, le=10.0, description="compute slows by this fraction "
                                  "per modelled hour (thermal throttling)")


class EngineSpec(StrictModel):
    """Everything about the server that must be identical across arms (the 'one dimension at a time' rule)."""

    kind: EngineKind
    launcher: LauncherKind | None = Field(
        default=None, description="docker (containers on a GPU box), process (local) or external (servers you "
        "run; each arm's server.base_url); default: docker for vllm/trtllm, process for sim")
    image: str | None = Field(default=None, description="container image with a pinned tag, e.g. "
                              "vllm/vllm-openai:v0.32.0")
    image_digest: str | None = Field(default=None, description="expected sha256 digest of the image (recorded anyway)")
    model: Name = Field(min_length=1, description="model id or path as the engine takes it")
    served_model_name: Name | None = None
    tensor_parallel_size: int = Field(default=1, ge=1, le=64)
    gpu_memory_utilization: float = Field(default=0.9, gt=0.0, le=1.0)
    max_model_len: int | None = Field(default=None, ge=16, le=10_000_000)
    max_num_seqs: int | None = Field(default=None, ge=1, le=65_536)
    max_num_batched_tokens: int | None = Field(default=None, ge=16, le=10_000_000)
    enable_prefix_caching: bool = True
    host: Name = Field(default="127.0.0.1", description="address the server binds and the harness talks to")
    port: int = Field(default=8000, ge=0, le=65_535, description="0 picks a free port at launch")
    env: dict[EnvName, EnvValue] = Field(default_factory=dict, description="environment for the server (secrets are "
                                "passed through but never recorded)")
    extra_args: list[str] = Field(default_factory=list, description="extra engine CLI arguments, verbatim")
    gpus: str = Field(default="all", description="docker GPU request: 'all', a count, or device ids '0,1'")
    shm_size: str | None = Field(default=None, description="docker shared memory size; default: sized from the "
                                 "CPU tier (see docs/engines.md)")
    ipc: Literal["private", "host"] | None = Field(default=None, description="container IPC namespace: host shares "
                                                   "the host's /dev/shm (default: host for trtllm, private for vllm)")
    version: str | None = Field(default=None, description="engine release where no image tag names it (a local "
                                "process), e.g. 1.0.0; chooses the TensorRT-LLM version table")
    model_cache_dir: PathText | None = Field(default=None, description="host directory mounted as the model cache")
    readiness_timeout_s: float = Field(default=900.0, gt=0, le=7200)
    # Simulator only.
    sim_profile: Name = Field(default="demo", description="simulator hardware/model profile name")
    sim_profile_file: PathText | None = None
    sim_flavor: Literal["vllm", "trtllm"] = Field(default="vllm", description="which engine's API/metrics the "
                                                  "simulator speaks")
    sim_time_scale: float = Field(default=1.0, gt=0.0, le=1000.0)
    sim_args: list[str] = Field(default_factory=list, description="extra simulator flags (faults, seeds)")
    sim_noise: SimNoise | None = Field(default=None, description="seeded timing noise of the simulator (off "
                                       "when absent)")
    sim_clock: Literal["real", "virtual"] = Field(
        default="real", description="real: a simulator server in (scaled) real time over HTTP; virtual: the "
        "simulator's engine core and the load on one discrete-event clock in the harness process (no HTTP, no "
        "sleeping; `harness run --virtual`)")

    @field_validator("image")
    @classmethod
    def _image_reference(cls, value: str | None) -> str | None:
        """An image reference lands as an argument of ``docker run`` (the validation, compose files): one that
        starts with ``-`` would be read as a flag (``--privileged``), a blank or control character splits or hides
        it."""
        if value is None:
            return value
        no_control(value)
        if not value or _BLANK_RE.search(value):
            raise ValueError("an image reference has no spaces or blanks, e.g. vllm/vllm-openai:v0.32.0")
        if value.startswith("-"):
            raise ValueError(f"{value[:80]!r} starts with '-', which docker would read as an option, not an image: "
                             "give an image reference such as vllm/vllm-openai:v0.32.0")
        return value

    @field_validator("image_digest")
    @classmethod
    def _digest_format(cls, value: str | None) -> str | None:
        if value is not None and not _DIGEST_RE.fullmatch(value):
            raise ValueError("must look like sha256:<64 hex characters>")
        return value

    @field_validator("gpus")
    @classmethod
    def _gpus_format(cls, value: str) -> str:
        if not _GPUS_RE.fullmatch(value):
            raise ValueError("use 'all', a count such as '2', or device ids such as '0,1' or 'device=3'")
        return value

    @field_validator("shm_size")
    @classmethod
    def _shm_format(cls, value: str | None) -> str | None:
        if value is not None and not _SHM_RE.fullmatch(value):
            raise ValueError("must be a size like 16g, 512m or 1073741824")
        return value

    @model_validator(mode="after")
    def _launcher_default(self) -> EngineSpec:
        if self.launcher is None:
            object.__setattr__(self, "launcher", "process" if self.kind == "sim" else "docker")
        if self.launcher == "docker" and not self.image:
            raise ValueError("engine.image is required when engine.launcher is docker "
                             "(e.g. vllm/vllm-openai:v0.32.0)")
        return self

    @model_validator(mode="after")
    def _fields_that_apply(self) -> EngineSpec:
        """Refuse settings nothing would read: simulator flags on a real engine, container settings without a
        container, a shared-memory size the container does not get."""
        if self.kind != "sim":
            stray = self.changed_fields(SIM_FIELDS)
            if stray:
                raise ValueError(f"{', '.join(stray)} {_apply(stray)} to the simulator (engine.kind: sim) only, not "
                                 f"{self.kind}: remove {_them(stray)}")
        if self.effective_launcher != "docker":
            given = self.changed_fields(CONTAINER_FIELDS)
            if given:
                fix = (" (for a local process choose GPUs with engine.env.CUDA_VISIBLE_DEVICES)"
                       if "gpus" in given else "")
                raise ValueError(f"{', '.join(given)} {_apply(given)} to containers (engine.launcher: docker) only, "
                                 f"not {self.effective_launcher}: remove {_them(given)}{fix}")
        if self.sim_clock == "virtual" and self.effective_launcher != "process":
            raise ValueError(f"sim_clock: virtual runs the simulator inside the harness; it has no "
                             f"{self.effective_launcher} launcher: remove engine.launcher or set sim_clock: real")
        host_ipc = self.ipc == "host" or (self.ipc is None and self.kind == "trtllm")
        if self.effective_launcher == "docker" and self.shm_size is not None and host_ipc:
            why = "engine.ipc: host" if self.ipc == "host" else "TensorRT-LLM containers run with ipc host"
            raise ValueError(f"shm_size does nothing when the container shares the host's /dev/shm ({why}): remove "
                             "it, or set engine.ipc: private")
        return self

    @property
    def name_served(self) -> str:
        """The model name clients send in requests."""
        return self.served_model_name or self.model

    @property
    def effective_launcher(self) -> LauncherKind:
        """The launcher, after defaults."""
        return self.launcher or ("process" if self.kind == "sim" else "docker")
