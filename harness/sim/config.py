"""Resolved run-time configuration of the simulated engine (profile + command-line overrides).

Offload options mirror the real engines:

- vLLM ``--kv-offloading-size GiB`` -> ``CPUOffloadingSpec`` with ``cpu_bytes_to_use = GiB * 2**30``.
- vLLM ``--kv-transfer-config JSON`` with ``kv_connector: OffloadingConnector`` and
  ``kv_connector_extra_config``: ``spec_name`` (``CPUOffloadingSpec`` | ``TieringOffloadingSpec``),
  ``cpu_bytes_to_use`` (required, same message as vLLM when missing), ``block_size`` (a multiple of the GPU
  block size), ``eviction_policy`` (``lru`` | ``arc``), ``offload_prompt_only``, ``store_threshold`` (a chunk is
  stored on its n-th offer; values below 2 store every chunk; CPUOffloadingSpec only: TieringOffloadingSpec refuses
  2 or more, as vLLM) and, for tiering, ``secondary_tiers: [{type: fs, root_dir, n_read_threads,
  n_write_threads}]``.
- TensorRT-LLM ``host_cache_size`` (bytes; ``--host-cache-size``): a host tier filled on GPU eviction.

vLLM flavour stores write-through (every newly computed full prompt chunk is copied to the CPU tier, as vLLM's
OffloadingConnector does); the trtllm flavour stores blocks when the GPU evicts them (``on_evict``).

``noise`` (``--noise-seed``, ``--step-jitter``, ...): seeded run-to-run variance, off by default
(:mod:`harness.sim.noise`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from harness.sim.noise_spec import NoiseSpec
from harness.sim.profile import ComputeSpec, DiskSpec, LinkSpec, Profile

StoreMode = Literal["write_through", "on_evict"]
Flavor = Literal["vllm", "trtllm"]

CPU_SPEC = "CPUOffloadingSpec"
TIERING_SPEC = "TieringOffloadingSpec"


MODELLED_KEYS = frozenset({"spec_name", "cpu_bytes_to_use", "block_size", "blocks_per_chunk", "eviction_policy",
                           "offload_prompt_only", "secondary_tiers", "store_threshold"})
"""``kv_connector_extra_config`` keys the simulator models; others (e.g. ``max_tracker_size``) are accepted and
ignored with a warning at start-up."""


class ConfigError(ValueError):
    """Bad engine options; the message is what the real engine would say, where it says something."""


@dataclass(frozen=True)
class FsConfig:
    """The fs secondary tier."""

    root_dir: str
    n_read_threads: int = 16
    n_write_threads: int = 16
    max_bytes: int | None = None


@dataclass(frozen=True)
class OffloadConfig:
    """The CPU tier and, optionally, the fs tier behind it."""

    spec_name: str
    cpu_bytes: int
    chunk_blocks: int = 1
    eviction_policy: str = "lru"
    store_mode: StoreMode = "write_through"
    offload_prompt_only: bool = True
    store_threshold: int = 0
    fs: FsConfig | None = None
    ignored_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class EngineConfig:
    """Everything the engine model needs."""

    model_name: str
    block_size: int
    num_gpu_blocks: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    kv_bytes_per_token: int
    enable_prefix_caching: bool
    compute: ComputeSpec
    link: LinkSpec
    disk: DiskSpec
    offload: OffloadConfig | None = None
    seed: int = 0
    gpu_memory_utilization: float = 0.9
    kv_cache_bytes: int = 0
    noise: NoiseSpec = field(default_factory=NoiseSpec)

    @property
    def block_bytes(self) -> int:
        return self.block_size * self.kv_bytes_per_token


def _int_field(cfg: dict[str, Any], key: str, default: int) -> int:
    value = cfg.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"kv_connector_extra_config.{key} must be a positive integer (got {value!r})")
    return value


def parse_kv_transfer_config(text: str, gpu_block_size: int, disk_max_bytes: int | None) -> OffloadConfig:
    """Parse vLLM's ``--kv-transfer-config`` JSON for the OffloadingConnector."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--kv-transfer-config is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError("--kv-transfer-config must be a JSON object")
    connector = data.get("kv_connector")
    if connector != "OffloadingConnector":
        raise ConfigError(f"the simulator supports kv_connector 'OffloadingConnector' only (got {connector!r})")
    extra = data.get("kv_connector_extra_config") or {}
    if not isinstance(extra, dict):
        raise ConfigError("kv_connector_extra_config must be a JSON object")
    spec = extra.get("spec_name", CPU_SPEC)
    if spec not in (CPU_SPEC, TIERING_SPEC):
        raise ConfigError(f"spec_name {spec!r} is not supported by the simulator ({CPU_SPEC}, {TIERING_SPEC})")
    if "cpu_bytes_to_use" not in extra:
        raise ConfigError("cpu_bytes_to_use must be specified in kv_connector_extra_config")
    cpu_bytes = _int_field(extra, "cpu_bytes_to_use", 0)
    if "block_size" in extra and "blocks_per_chunk" in extra:
        raise ConfigError("block_size and blocks_per_chunk are mutually exclusive")
    if "blocks_per_chunk" in extra:
        block_size = _int_field(extra, "blocks_per_chunk", 1) * gpu_block_size
    else:
        block_size = _int_field(extra, "block_size", gpu_block_size)
    if block_size % gpu_block_size:
        raise ConfigError(
            f"offloaded block_size {block_size} must be a multiple of the GPU block size {gpu_block_size}"
        )
    policy = extra.get("eviction_policy", "lru")
    if policy not in ("lru", "arc"):
        raise ConfigError(f"eviction_policy must be 'lru' or 'arc' (got {policy!r})")
    prompt_only = extra.get("offload_prompt_only", True)
    if not isinstance(prompt_only, bool):
        raise ConfigError("offload_prompt_only must be true or false")
    threshold = extra.get("store_threshold", 0)
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
        raise ConfigError(f"kv_connector_extra_config.store_threshold must be a non-negative integer "
                          f"(got {threshold!r})")
    if spec == TIERING_SPEC and threshold >= 2:
        raise ConfigError("store_threshold is not supported for TieringOffloadingSpec")
    fs: FsConfig | None = None
    tiers = extra.get("secondary_tiers")
    if spec == TIERING_SPEC:
        if not isinstance(tiers, list) or not tiers:
            raise ConfigError("TieringOffloadingSpec needs a non-empty secondary_tiers list")
        if len(tiers) != 1 or not isinstance(tiers[0], dict) or tiers[0].get("type") != "fs":
            raise ConfigError("the simulator supports exactly one secondary tier of type 'fs'")
        tier = tiers[0]
        root = tier.get("root_dir")
        if not isinstance(root, str) or not root:
            raise ConfigError("the fs secondary tier needs a root_dir")
        fs = FsConfig(
            root_dir=root,
            n_read_threads=_int_field(tier, "n_read_threads", 16),
            n_write_threads=_int_field(tier, "n_write_threads", 16),
            max_bytes=disk_max_bytes,
        )
    elif tiers:
        raise ConfigError("secondary_tiers needs spec_name TieringOffloadingSpec")
    ignored = tuple(sorted(set(extra) - MODELLED_KEYS))
    return OffloadConfig(
        spec_name=spec,
        cpu_bytes=cpu_bytes,
        chunk_blocks=block_size // gpu_block_size,
        eviction_policy=policy,
        store_mode="write_through",
        offload_prompt_only=prompt_only,
        store_threshold=threshold,
        fs=fs,
        ignored_keys=ignored,
    )


def build_engine_config(
    profile: Profile,
    *,
    flavor: Flavor = "vllm",
    model_name: str = "sim-model",
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    max_model_len: int | None = None,
    block_size: int | None = None,
    gpu_memory_utilization: float | None = None,
    enable_prefix_caching: bool = True,
    kv_offloading_size_gib: float | None = None,
    kv_transfer_config: str | None = None,
    host_cache_size: int | None = None,
    disk_tier_max_bytes: int | None = None,
    seed: int = 0,
    noise: NoiseSpec | None = None,
) -> EngineConfig:
    """Apply command-line overrides to a profile and check what the real engine checks at start-up."""
    bs = block_size or profile.scheduler.block_size
    util = profile.gpu.gpu_memory_utilization if gpu_memory_utilization is None else gpu_memory_utilization
    if not 0.0 < util <= 1.0:
        raise ConfigError(f"gpu_memory_utilization must be in (0, 1] (got {util})")
    kv_bytes = profile.kv_cache_bytes(util)
    bpt = profile.model.kv_bytes_per_token
    if kv_bytes <= bpt * bs:
        raise ConfigError(
            "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
            "initializing the engine."
        )
    num_blocks = kv_bytes // (bpt * bs)
    mml = max_model_len or profile.model.max_model_len
    if mml > num_blocks * bs:
        raise ConfigError(
            f"To serve at least one request with the models's max seq len ({mml}), "
            f"({mml * bpt / 2**30:.2f} GiB KV cache is needed, which is larger than the available KV cache "
            f"memory ({kv_bytes / 2**30:.2f} GiB). Based on the available memory, the estimated maximum model "
            f"length is {num_blocks * bs}. Try increasing `gpu_memory_utilization` or decreasing "
            "`max_model_len` when initializing the engine."
        )
    offload: OffloadConfig | None = None
    if flavor == "vllm":
        if host_cache_size:
            raise ConfigError("--host-cache-size is a TensorRT-LLM option; use --flavor trtllm")
        if kv_offloading_size_gib is not None and kv_transfer_config:
            raise ConfigError("--kv-offloading-size and --kv-transfer-config are mutually exclusive")
        if kv_offloading_size_gib is not None:
            if kv_offloading_size_gib <= 0:
                raise ConfigError("--kv-offloading-size must be positive")
            offload = OffloadConfig(spec_name=CPU_SPEC, cpu_bytes=int(kv_offloading_size_gib * 2**30))
        elif kv_transfer_config:
            offload = parse_kv_transfer_config(kv_transfer_config, bs, disk_tier_max_bytes)
    else:
        if kv_offloading_size_gib is not None or kv_transfer_config:
            raise ConfigError("--kv-offloading-size / --kv-transfer-config are vLLM options; use --flavor vllm")
        if host_cache_size:
            offload = OffloadConfig(spec_name="trtllm-host", cpu_bytes=host_cache_size, store_mode="on_evict")
    if offload is not None and offload.cpu_bytes < offload.chunk_blocks * bs * bpt:
        raise ConfigError("the CPU tier is smaller than one offloaded block")
    return EngineConfig(
        model_name=model_name,
        block_size=bs,
        num_gpu_blocks=num_blocks,
        max_num_seqs=max_num_seqs or profile.scheduler.max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens or profile.scheduler.max_num_batched_tokens,
        max_model_len=mml,
        kv_bytes_per_token=bpt,
        enable_prefix_caching=enable_prefix_caching,
        compute=profile.compute,
        link=profile.link,
        disk=profile.disk,
        offload=offload,
        seed=seed,
        gpu_memory_utilization=util,
        kv_cache_bytes=kv_bytes,
        noise=noise or NoiseSpec(),
    )
