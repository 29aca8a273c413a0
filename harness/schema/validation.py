"""What the engine's own code said about each arm before launch, and what it resolved: ``validation.json``.

The record the guards and the report read (docs/validation.md): for vLLM, the parsed engine fields
(:class:`ResolvedEngine`), the KV-transfer/offloading configuration with the offload spec's chunk size and count at
the *target* GPU's block size (:class:`ResolvedOffload`), and the platform the check ran on. Fields a release or an
engine does not report are None; an engine's output is refused nowhere here (unknown keys are ignored), since the
script and the engine may be newer than the reader.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["ok", "platform", "rejected", "not-checked", "error"]


class _Resolved(BaseModel):
    """A part of what the engine resolved: unknown keys ignored, every field optional."""

    model_config = ConfigDict(extra="ignore")


class ResolvedEngine(_Resolved):
    """vLLM's parsed values (VllmConfig / the serve namespace) of the fields every arm must share."""

    model: str | None = None
    served_model_name: str | None = None
    max_model_len: int | None = None
    dtype: str | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    data_parallel_size: int | None = None
    gpu_memory_utilization: float | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_prefix_caching: bool | None = None
    cache_dtype: str | None = None
    block_size: int | None = Field(default=None, description="KV block tokens on the platform the check ran on")
    user_block_size: bool | None = None
    kv_offloading_size_gib: float | None = None
    kv_offloading_backend: str | None = None
    enable_prompt_tokens_details: bool | None = None
    host: str | None = None
    port: int | None = None


class ResolvedOffload(_Resolved):
    """The KV connector vLLM resolved, and for OffloadingConnector what its own builder made of it."""

    connector: str
    role: str | None = None
    extra_config: dict[str, Any] = Field(default_factory=dict)
    spec: str | None = None
    target_block_size: int | None = Field(default=None, description="GPU KV block tokens on the target GPU")
    target_block_source: str | None = None
    platform_block_size: int | None = None
    blocks_per_chunk: int | None = None
    tokens_per_chunk: int | None = None
    chunk_bytes: int | None = Field(default=None, description="aligned bytes of one offload chunk, all workers")
    num_chunks: int | None = None
    cpu_bytes_to_use: int | None = None
    eviction_policy: str | None = None
    store_threshold: int | None = None
    tiers: list[dict[str, Any]] = Field(default_factory=list, description="secondary tiers as the spec holds them")
    manager: str | None = Field(default=None, description="the manager class get_manager() built")


class ResolvedPlatform(_Resolved):
    """The platform vLLM detected, the one the check used, and whether it was forced."""

    detected: str | None = None
    used: str | None = None
    forced: bool = False


class ResolvedArm(_Resolved):
    """Everything the engine resolved for one arm."""

    engine: ResolvedEngine = Field(default_factory=ResolvedEngine)
    offload: ResolvedOffload | None = None
    platform: ResolvedPlatform = Field(default_factory=ResolvedPlatform)


class ArmValidation(BaseModel):
    """One arm's verdict from the engine's own code."""

    model_config = ConfigDict(extra="forbid")
    arm: str
    status: Status
    stage: str | None = None
    message: str
    where: str = Field(description="where it ran: the image, or the interpreter")
    engine_version: str | None = None
    notes: list[str] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)
    resolved: ResolvedArm | None = None

    @property
    def passed(self) -> bool:
        """ok, or ok up to the platform's limit."""
        return self.status in ("ok", "platform")


ValidationState = Literal["validated", "incomplete", "skipped", "not-applicable"]


class ValidationRecord(BaseModel):
    """What was validated before launch: ``validated`` (every arm checked), ``incomplete`` (some arm could not be
    checked), ``skipped`` (``--no-validate``) or ``not-applicable`` (the simulator); the results per arm."""

    model_config = ConfigDict(extra="forbid")
    state: ValidationState
    reason: str | None = None
    arms: list[ArmValidation] = Field(default_factory=list)

    def banner(self) -> str | None:
        """The loud line a plan or report opens with when the engine's own code did not check every arm."""
        if self.state in ("validated", "not-applicable"):
            return None
        return f"NOT VALIDATED: {self.reason or self.state}"


def unvalidated(results: list[ArmValidation]) -> list[ArmValidation]:
    """The arms the engine's code did not pass or reject: it could not check them."""
    return [r for r in results if r.status in ("not-checked", "error")]


def _size(n: int) -> str:
    return f"{n / (1 << 30):.2f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.2f} MiB"


def resolved_line(result: ArmValidation) -> str | None:
    """One line on what the engine resolved for an arm (its offload configuration first), or None if nothing."""
    got = result.resolved
    if got is None:
        return None
    eng = got.engine
    shared = (f"max_model_len {eng.max_model_len}, tp {eng.tensor_parallel_size}, gpu_memory_utilization "
              f"{eng.gpu_memory_utilization!r}, prefix caching {'on' if eng.enable_prefix_caching else 'off'}")
    off = got.offload
    if off is None:
        return f"no KV connector (GPU KV cache only); {shared}"
    head = f"{off.connector}" + (f" / {off.spec}" if off.spec else "")
    if off.num_chunks is not None and off.chunk_bytes is not None:
        head += (f": {off.num_chunks} chunks of {off.tokens_per_chunk} tokens ({_size(off.chunk_bytes)} each) at the "
                 f"target GPU's block size {off.target_block_size}, CPU tier {_size(off.cpu_bytes_to_use or 0)}")
        if off.eviction_policy:
            head += f", {off.eviction_policy}"
    for tier in off.tiers:
        head += f"; {tier.get('type')} tier at {tier.get('root_dir')}"
    if off.manager:
        head += f"; manager {off.manager}"
    forced = f"; platform forced to {got.platform.used}" if got.platform.forced else ""
    return f"{head}; {shared}{forced}"
