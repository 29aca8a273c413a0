"""Hardware/model profiles for the simulated engine.

Every number the engine model uses lives in a profile YAML file (``harness/sim/profiles/NAME.yaml`` or a file
given with ``--profile-file``); the code holds no hidden constants. A profile describes:

- ``model``: the transformer's KV geometry. KV bytes per token = 2 (K and V) x layers x KV heads x head dim x
  bytes per element.
- ``gpu``: memory and the weights/activation footprint. KV capacity follows vLLM's rule:
  ``kv_bytes = memory_bytes * gpu_memory_utilization - weights_bytes - activation_reserve_bytes``.
- ``compute``: step-time coefficients (see :mod:`harness.sim.scheduler` for the equation).
- ``link``: host<->device bandwidth (PCIe) for CPU-tier loads and stores.
- ``disk``: the fs tier's read/write bandwidth and per-read latency.
- ``scheduler``: block size and batching limits (vLLM's ``max_num_seqs`` / ``max_num_batched_tokens``).
- ``sources``: where the figures come from, as data (``part``: ``general``, a section above, or ``host`` for facts
  of the host that are not simulator fields; ``text``: the note, line breaks kept). ``harness sim profiles
  --sources`` lists them and every PREDICTED report (``harness predict``) shows them in its header; the figures'
  one-line derivations stay as comments beside them.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.core.input_files import InputFileError, read_text
from harness.core.safe_yaml import YamlInputError, load_yaml


class ProfileError(ValueError):
    """A profile could not be found, parsed or validated."""


class ProfileFileError(ProfileError):
    """A ``--profile-file`` that cannot be used (not a regular file, too large, not YAML, invalid): bad input."""


MAX_PROFILE_BYTES = 1 << 20
"""Largest profile file read (a shipped profile is about 2 KiB)."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSpec(_Strict):
    """KV geometry of the served model."""

    name: str
    num_layers: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    kv_dtype_bytes: int = Field(gt=0)
    max_model_len: int = Field(gt=0)

    @property
    def kv_bytes_per_token(self) -> int:
        """2 (K and V) x layers x KV heads x head dim x dtype bytes."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * self.kv_dtype_bytes


class GpuSpec(_Strict):
    """GPU memory budget."""

    name: str
    memory_bytes: int = Field(gt=0)
    weights_bytes: int = Field(ge=0)
    activation_reserve_bytes: int = Field(ge=0)
    gpu_memory_utilization: float = Field(default=0.9, gt=0.0, le=1.0)


class ComputeSpec(_Strict):
    """Step-time coefficients, seconds."""

    step_overhead_s: float = Field(ge=0.0)
    prefill_s_per_token: float = Field(ge=0.0)
    prefill_s_per_token_ctx: float = Field(ge=0.0)
    decode_s_per_seq: float = Field(ge=0.0)
    decode_s_per_ctx_token: float = Field(ge=0.0)


class LinkSpec(_Strict):
    """Host<->device link used by CPU-tier loads (H2D) and stores (D2H)."""

    h2d_bytes_per_s: float = Field(gt=0.0)
    d2h_bytes_per_s: float = Field(gt=0.0)
    latency_s: float = Field(default=0.0, ge=0.0)


class DiskSpec(_Strict):
    """The fs tier's storage device."""

    read_bytes_per_s: float = Field(gt=0.0)
    write_bytes_per_s: float = Field(gt=0.0)
    read_latency_s: float = Field(ge=0.0)
    write_latency_s: float = Field(default=0.0, ge=0.0)


class SchedulerSpec(_Strict):
    """Batching limits (defaults of the engine being modelled)."""

    block_size: int = Field(default=16, gt=0)
    max_num_seqs: int = Field(gt=0)
    max_num_batched_tokens: int = Field(gt=0)


SourcePart = Literal["general", "model", "gpu", "compute", "link", "disk", "scheduler", "host"]


class ProfileSource(_Strict):
    """One source note: what a part of the profile rests on (datasheets, config.json, measurements, estimates)."""

    part: SourcePart
    text: str = Field(min_length=1)


class Profile(_Strict):
    """A complete engine/hardware profile."""

    name: str
    description: str = ""
    sources: tuple[ProfileSource, ...] = ()
    model: ModelSpec
    gpu: GpuSpec
    compute: ComputeSpec
    link: LinkSpec
    disk: DiskSpec
    scheduler: SchedulerSpec

    def kv_cache_bytes(self, gpu_memory_utilization: float | None = None) -> int:
        """GPU bytes left for KV: memory x utilisation - weights - activation reserve (vLLM's rule)."""
        util = self.gpu.gpu_memory_utilization if gpu_memory_utilization is None else gpu_memory_utilization
        return int(self.gpu.memory_bytes * util) - self.gpu.weights_bytes - self.gpu.activation_reserve_bytes


def builtin_profile_names() -> list[str]:
    """Names of the profiles shipped inside the package."""
    folder = resources.files("harness.sim").joinpath("profiles")
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def _parse(text: str, origin: str, error: type[ProfileError] = ProfileError) -> Profile:
    try:
        data = load_yaml(text)
    except YamlInputError as exc:
        raise error(f"{origin}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise error(f"{origin}: expected a mapping at the top level")
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()[:10]
        )
        raise error(f"{origin}: {problems}") from None


def load_profile(name: str | None = None, path: str | Path | None = None) -> Profile:
    """Load a built-in profile by ``name`` or a profile file by ``path`` (exactly one of them)."""
    if (name is None) == (path is None):
        raise ProfileError("give exactly one of a profile name or a profile file")
    if path is not None:
        try:
            text = read_text(path, max_bytes=MAX_PROFILE_BYTES, what="profile file")
        except InputFileError as exc:
            raise ProfileFileError(f"cannot read profile file {exc}") from None
        return _parse(text, str(path), ProfileFileError)
    assert name is not None
    names = builtin_profile_names()
    if name not in names:
        raise ProfileError(f"unknown profile {name!r}; built-in profiles: {', '.join(names)}")
    res = resources.files("harness.sim").joinpath("profiles").joinpath(f"{name}.yaml")
    return _parse(res.read_text(encoding="utf-8"), f"profile {name}")
