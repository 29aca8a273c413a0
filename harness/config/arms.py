"""The ``arms`` section: one server configuration each; only cache/offload settings may differ from the baseline.

Offload settings are a tagged union on ``kind``:

* ``none`` — GPU KV cache only (the baseline).
* ``vllm-native`` — vLLM's ``--kv-offloading-size`` (GiB, TOTAL across tensor-parallel ranks) and
  ``--kv-offloading-backend native`` (``lmcache`` is refused: see :data:`LMCACHE_REFUSED`).
* ``vllm-connector`` — an explicit ``OffloadingConnector`` config passed as ``--kv-transfer-config``
  (``CPUOffloadingSpec`` or ``TieringOffloadingSpec`` with ``fs`` secondary tiers). A tier's ``extra`` keys are passed
  through verbatim but may not set the keys the harness writes itself (:data:`FS_TIER_MANAGED_KEYS`).
* ``trtllm`` — TensorRT-LLM's ``kv_cache_config`` (``host_cache_size`` in bytes; 0 means no host offload).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from harness.config.base import StrictModel
from harness.config.external import ExternalServer
from harness.config.text import PathText

Tier = Literal["gpu-only", "cpu", "tiered"]
TIER_ORDER: dict[str, int] = {"gpu-only": 0, "cpu": 1, "tiered": 2}
GIB = 1 << 30
_ARM_NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
# Upper bounds that catch typos (bytes given where GiB were meant) rather than real limits.
MAX_TIER_GIB = 64 * 1024.0
MAX_TIER_BYTES = int(MAX_TIER_GIB * GIB)


class NoOffload(StrictModel):
    """GPU KV cache only."""

    kind: Literal["none"] = "none"


# vLLM 0.32.0, vllm/config/vllm.py VllmConfig._post_init_kv_transfer_config: kv_offloading_backend "lmcache" sets
# kv_connector = "LMCacheMPConnector" and does NOT pass kv_offloading_size on ("the actual KV storage capacity is
# managed by the standalone LMCache server process"); LMCacheMPConnector falls back to tcp://localhost:5555.
LMCACHE_REFUSED = (
    "kv_offloading_backend lmcache is not supported: vLLM 0.32 maps it to LMCacheMPConnector (vllm/config/vllm.py, "
    "_post_init_kv_transfer_config), which needs a separately run LMCache server (tcp://localhost:5555 by default) "
    "and ignores kv_offloading_size; the harness starts no such server, and it would size /dev/shm and host-memory "
    "headroom for a CPU tier vLLM never allocates. Use kv_offloading_backend: native, or run your own vLLM + LMCache "
    "server and add it as an external arm (engine.launcher: external, with the arm's server.base_url)")


class VllmNativeOffload(StrictModel):
    """vLLM's native offload flags."""

    kind: Literal["vllm-native"]
    kv_offloading_size_gib: float = Field(gt=0, le=MAX_TIER_GIB, description="CPU tier size in GiB, total "
                                          "across tensor-parallel ranks")
    kv_offloading_backend: Literal["native"] = Field(default="native", description="native (vLLM's own CPU tier); "
                                                     "lmcache is refused")

    @field_validator("kv_offloading_backend", mode="before")
    @classmethod
    def _no_lmcache(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() == "lmcache":
            raise ValueError(LMCACHE_REFUSED)
        return value


# Keys of a secondary tier the harness writes itself (vllm.connector_config spreads ``extra`` after them, so extra
# would win): key -> (the FsTier field that sets it, or "" for none; why it is refused).
FS_TIER_MANAGED_KEYS: dict[str, tuple[str, str]] = {
    "type": ("type", "is the tier type the harness writes from the tier's type field"),
    "root_dir": ("root_dir", "is the directory the harness writes from the tier's root_dir field (and mounts, "
                 "checks for free space and cleans)"),
    "n_read_threads": ("n_read_threads", "is written by the harness from the tier's n_read_threads field"),
    "n_write_threads": ("n_write_threads", "is written by the harness from the tier's n_write_threads field"),
    "size_gib": ("size_gib", "is the harness's own field (vLLM's fs tier takes no size; the disk checks read it)"),
    "module_path": ("", "would make vLLM's SecondaryTierFactory load another tier class, whose storage the "
                    "harness's fs-tier checks know nothing of"),
}


class FsTier(StrictModel):
    """A file-system secondary tier behind the CPU tier (vLLM TieringOffloadingSpec ``type: fs``)."""

    type: Literal["fs"] = "fs"
    root_dir: PathText = Field(min_length=1, description="absolute directory for the tier's files")
    n_read_threads: int = Field(default=16, ge=1, le=1024)
    n_write_threads: int = Field(default=16, ge=1, le=1024)
    size_gib: float | None = Field(default=None, gt=0, le=1024 * 1024.0, description="disk you plan to give the "
                                   "tier; vLLM 0.32's fs tier has no cap of its own (the simulator enforces it)")
    extra: dict[str, Any] = Field(default_factory=dict, description="further per-tier keys passed to vLLM "
                                  "verbatim (e.g. locality, enable_kv_events); vLLM rejects keys its tier lacks")

    @field_validator("extra")
    @classmethod
    def _no_managed_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        keys = [k for k in value if k in FS_TIER_MANAGED_KEYS]
        if keys:
            fields = [FS_TIER_MANAGED_KEYS[k][0] for k in keys]
            whys = [FS_TIER_MANAGED_KEYS[k][1] for k in keys]
            plain = "; ".join(f"{k!r} {w}; " + (f"set the tier's {f} instead" if f else "remove it")
                              for k, f, w in zip(keys, fields, whys, strict=True))
            # harness.config.errors.explain turns this into the same text with the full field paths
            raise PydanticCustomError("managed_key", "{plain}", {"plain": plain, "keys": keys, "fields": fields,
                                                                 "whys": whys})
        return value


class VllmConnectorOffload(StrictModel):
    """An explicit OffloadingConnector configuration (``--kv-transfer-config``)."""

    kind: Literal["vllm-connector"]
    spec_name: Literal["CPUOffloadingSpec", "TieringOffloadingSpec"] = "CPUOffloadingSpec"
    cpu_bytes_to_use: int = Field(gt=0, le=MAX_TIER_BYTES, description="CPU tier bytes, total across workers")
    block_size: int | None = Field(default=None, ge=1, le=1 << 20, description="tokens per offloaded chunk; a "
                                   "multiple of the KV block size")
    eviction_policy: Literal["lru", "arc"] = "lru"
    store_threshold: int | None = Field(default=None, ge=0, le=1 << 20)
    offload_prompt_only: bool | None = None
    secondary_tiers: list[FsTier] = Field(default_factory=list)

    @model_validator(mode="after")
    def _tiers_match_spec(self) -> VllmConnectorOffload:
        if self.spec_name == "TieringOffloadingSpec" and not self.secondary_tiers:
            raise ValueError("TieringOffloadingSpec needs at least one entry in secondary_tiers "
                             "(e.g. {type: fs, root_dir: /mnt/nvme/kv})")
        if self.spec_name == "CPUOffloadingSpec" and self.secondary_tiers:
            raise ValueError("secondary_tiers need spec_name: TieringOffloadingSpec")
        if self.spec_name == "TieringOffloadingSpec" and self.store_threshold is not None:
            raise ValueError("store_threshold applies to CPUOffloadingSpec (single tier) only")
        return self


class TrtllmKvCache(StrictModel):
    """TensorRT-LLM ``kv_cache_config`` fields the harness manages."""

    kind: Literal["trtllm"]
    enable_block_reuse: bool = True
    free_gpu_memory_fraction: float = Field(default=0.9, gt=0, le=1)
    host_cache_size: int = Field(default=0, ge=0, le=MAX_TIER_BYTES, description="host offload bytes; 0 = none")
    secondary_offload_min_priority: int | None = Field(default=None, ge=0, le=100)
    tokens_per_block: int = Field(default=32, ge=1, le=1024)
    max_tokens: int | None = Field(default=None, ge=1)
    enable_partial_reuse: bool | None = None


Offload = Annotated[NoOffload | VllmNativeOffload | VllmConnectorOffload | TrtllmKvCache, Field(discriminator="kind")]
OFFLOAD_KINDS = ("none", "vllm-native", "vllm-connector", "trtllm")


class Arm(StrictModel):
    """One server configuration, run on a freshly started server."""

    name: str
    tier: Tier
    description: str | None = None
    offload: Offload = Field(default_factory=NoOffload)
    engine: dict[str, Any] = Field(default_factory=dict, description="overrides of engine fields for this arm; "
                                   "anything but cache settings breaks the one-dimension rule")
    server: ExternalServer | None = Field(default=None, description="an existing deployment to drive instead of "
                                          "a server the harness starts (engine.launcher: external)")

    @field_validator("name")
    @classmethod
    def _name_format(cls, value: str) -> str:
        if not _ARM_NAME_RE.fullmatch(value):  # fullmatch: "$" would let a trailing newline through
            raise ValueError("use 1-63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit")
        return value

    def cpu_tier_bytes(self) -> int:
        """Bytes of host memory the arm's CPU tier takes (vLLM: total across TP ranks); 0 when none."""
        off = self.offload
        if isinstance(off, VllmNativeOffload):
            return int(off.kv_offloading_size_gib * GIB)
        if isinstance(off, VllmConnectorOffload):
            return off.cpu_bytes_to_use
        if isinstance(off, TrtllmKvCache):
            return off.host_cache_size
        return 0

    def fs_tiers(self) -> list[FsTier]:
        """The arm's file-system tiers, if any."""
        return list(self.offload.secondary_tiers) if isinstance(self.offload, VllmConnectorOffload) else []
