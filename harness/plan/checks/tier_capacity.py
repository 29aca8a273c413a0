"""A CPU tier no larger than the GPU KV cache adds (next to) no capacity: warned before the run.

vLLM's OffloadingConnector (``--kv-offloading-size`` or an explicit ``--kv-transfer-config``, and the simulator in
its ``vllm`` flavor) stores every block the GPU computes, so its CPU tier holds a copy of what the GPU holds; a tier
at or below the GPU KV cache mirrors the GPU and serves (next to) no hits. A tier adds capacity only above the GPU's
size. TensorRT-LLM's host cache (and the simulator's ``trtllm`` flavor) is different: it takes the blocks the GPU
*evicts*, so even a small host tier adds its size on top of the GPU's; those arms get an ok item saying so.

The GPU KV cache an arm will have, in order of trust (the item names where its figure came from):

1. the engine's resolved record: ``validation.json`` carries none (vLLM's check builds its configuration without
   allocating GPU memory), so this source is empty before the run; after it, the fit screen reads the size the
   server reported (``vllm:cache_config_info`` ``num_gpu_blocks`` x ``block_size``);
2. the simulator's profile (``engine.sim_profile`` / ``sim_profile_file``): vLLM's rule as the simulator applies it,
   ``(GPU memory x engine.gpu_memory_utilization - weights - activation reserve)`` floored to whole blocks of
   ``block_size x KV bytes per token``;
3. the model's ``config.json`` on this machine (KV bytes per token) with its safetensors (weights) and the GPU's
   memory: ``tensor_parallel_size x memory x utilisation - weights``, an upper bound (vLLM's activation reserve is
   measured at start-up, not known here). The GPU's memory is this host's smallest GPU (``nvidia-smi``, through
   :class:`harness.host.facts.HostFacts`), passed as ``gpu_memory_bytes``; without a GPU the item says so.

When no source gives a figure the item says so (level ok, "cannot estimate ..."), never a guessed size.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.config.arms import Arm, TrtllmKvCache
from harness.config.engine import EngineSpec
from harness.config.scenario import Scenario
from harness.core.input_files import InputFileError, read_text
from harness.engines.sim_start import sim_profile_data
from harness.plan.checks.blocks import GPU_BLOCK_TOKENS, block_bytes, local_model_config
from harness.schema.summary import CheckItem

NAME = "tier-capacity"
GIB = 1 << 30
MIB = 1 << 20
SUGGESTED_FACTOR = 4
_MAX_FILE_BYTES = 8 << 20  # a profile is ~2 KiB, a safetensors index ~100 KiB


@dataclass(frozen=True)
class GpuKv:
    """The GPU KV cache an arm will have (all tensor-parallel ranks together), and where the figure came from."""

    bytes: int
    source: str
    bytes_per_token: int | None = None
    upper_bound: bool = False

    @property
    def tokens(self) -> int | None:
        return self.bytes // self.bytes_per_token if self.bytes_per_token else None


@dataclass(frozen=True)
class Unknown:
    """Why the GPU KV cache cannot be estimated: one sentence per missing fact."""

    missing: list[str]


def size_text(n: float) -> str:
    """``1.0 GiB``, ``2.9 GiB``, ``512 MiB``."""
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / MIB:.0f} MiB"


def tokens_text(n: float) -> str:
    """``95k``, ``8.9k``, ``512``."""
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    return f"{n / 1000:.1f}k" if n >= 1000 else f"{n:.0f}"


def mirrors_gpu(engine: EngineSpec, arm: Arm) -> bool:
    """Whether the arm's CPU tier stores what the GPU computes (vLLM's OffloadingConnector, the simulator's vLLM
    flavor) rather than what the GPU evicts (TensorRT-LLM's host cache)."""
    if isinstance(arm.offload, TrtllmKvCache):
        return False
    return engine.kind == "vllm" or (engine.kind == "sim" and engine.sim_flavor == "vllm")


# --- sources --------------------------------------------------------------------------------------------------------

def _profile_data(engine: EngineSpec, base: Path | None) -> tuple[dict[str, Any] | None, str]:
    """The simulator profile as plain data, read by the simulator's own reader, and its name (None and why when
    it cannot be read)."""
    return sim_profile_data(engine, base)


def _int(data: dict[str, Any], section: str, key: str, default: int | None = None) -> int | None:
    part = data.get(section)
    value = part.get(key, default) if isinstance(part, dict) else default
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def sim_profile_estimate(engine: EngineSpec, arm: Arm, base: Path | None = None) -> GpuKv | Unknown:
    """The simulator's GPU KV cache for this arm, as ``harness/sim/config.py`` computes it from the profile."""
    data, label = _profile_data(engine, base)
    if data is None:
        return Unknown([f"the {label} cannot be used"])
    geometry = [_int(data, "model", k) for k in ("num_layers", "num_kv_heads", "head_dim", "kv_dtype_bytes")]
    gpu = [_int(data, "gpu", k) for k in ("memory_bytes", "weights_bytes", "activation_reserve_bytes")]
    profile_block = _int(data, "scheduler", "block_size", GPU_BLOCK_TOKENS)
    if any(v is None for v in (*geometry, *gpu, profile_block)):
        return Unknown([f"the {label} lacks the KV geometry or GPU memory figures"])
    layers, heads, head_dim, dtype_bytes = (int(v or 0) for v in geometry)
    memory, weights, reserve = (int(v or 0) for v in gpu)
    bpt = 2 * layers * heads * head_dim * dtype_bytes
    block = arm.offload.tokens_per_block if isinstance(arm.offload, TrtllmKvCache) else int(profile_block or 0)
    util = engine.gpu_memory_utilization  # the adapter always passes it (--gpu-memory-utilization)
    kv = int(memory * util) - weights - reserve
    if bpt <= 0 or block <= 0 or kv <= bpt * block:
        return Unknown([f"the {label} leaves no GPU memory for KV at gpu_memory_utilization {util:g} (the "
                        "simulator refuses to start)"])
    blocks = kv // (bpt * block)
    source = (f"{label}: {util:g} x {size_text(memory)} - weights {size_text(weights)} - activation reserve "
              f"{size_text(reserve)} = {blocks} blocks x {block} tokens x {bpt // 1024} KiB/token")
    return GpuKv(bytes=blocks * block * bpt, source=source, bytes_per_token=bpt)


def _weights_bytes(config_path: Path) -> int | None:
    """Bytes of the model's weights next to its config.json (the safetensors index's total, else the files)."""
    folder = config_path.parent
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            total = json.loads(read_text(index, max_bytes=_MAX_FILE_BYTES)).get("metadata", {}).get("total_size")
        except (InputFileError, ValueError, AttributeError):
            total = None
        if isinstance(total, int) and total > 0:
            return total
    files = sorted(folder.glob("*.safetensors"))
    try:
        return sum(f.stat().st_size for f in files) or None
    except OSError:
        return None


def _model_config(engine: EngineSpec, base: Path | None) -> tuple[Path | None, int | None]:
    path = local_model_config(engine.model, engine.model_cache_dir, base)
    if path is None:
        return None, None
    try:
        config = json.loads(read_text(path, max_bytes=_MAX_FILE_BYTES, what="model config"))
    except (InputFileError, ValueError):
        return path, None
    return path, block_bytes(config, 1) if isinstance(config, dict) else None


def model_config_estimate(engine: EngineSpec, arm: Arm, gpu_memory_bytes: int | None,
                          base: Path | None = None) -> GpuKv | Unknown:
    """An upper bound of a real engine's GPU KV cache from the model on this machine and the GPU's memory."""
    path, bpt = _model_config(engine, base)
    weights = _weights_bytes(path) if path is not None else None
    missing: list[str] = []
    if gpu_memory_bytes is None:
        missing.append("no GPU on this host reports its memory (nvidia-smi)")
    if path is None:
        missing.append(f"the model config.json of {engine.model} is not on this machine")
    elif bpt is None:
        missing.append(f"{path} lacks the KV geometry")
    elif weights is None:
        missing.append(f"no safetensors files next to {path} give the weights' size")
    if missing or gpu_memory_bytes is None or weights is None:
        return Unknown(missing)
    tp = engine.tensor_parallel_size
    off = arm.offload
    if isinstance(off, TrtllmKvCache):  # a fraction of what is free after the weights (activations not counted)
        fraction = off.free_gpu_memory_fraction
        kv = int(fraction * (tp * gpu_memory_bytes - weights))
        rule = f"{fraction:g} x ({tp} x {size_text(gpu_memory_bytes)} - weights {size_text(weights)})"
        if off.max_tokens is not None and bpt is not None:
            kv = min(kv, off.max_tokens * bpt)
            rule += f", at most max_tokens {off.max_tokens}"
    else:
        util = engine.gpu_memory_utilization
        kv = int(tp * gpu_memory_bytes * util) - weights
        rule = f"{tp} x {size_text(gpu_memory_bytes)} x {util:g} - weights {size_text(weights)}"
    if kv <= 0:
        return Unknown([f"the weights ({size_text(weights)}) leave no GPU memory for KV"])
    source = (f"{path}: {rule}; an upper bound, the activation reserve measured at start-up not counted")
    return GpuKv(bytes=kv, source=source, bytes_per_token=bpt, upper_bound=True)


def estimate_gpu_kv(scenario: Scenario, arm: Arm, *, gpu_memory_bytes: int | None = None) -> GpuKv | Unknown:
    """The GPU KV cache ``arm`` will have (its sources in the module's order), or the facts that are missing."""
    engine = scenario.engine_for(arm)
    base = Path(scenario.source_file).parent if scenario.source_file else None
    if engine.kind == "sim":
        return sim_profile_estimate(engine, arm, base)
    return model_config_estimate(engine, arm, gpu_memory_bytes, base)


def kv_bytes_per_token(scenario: Scenario, arm: Arm) -> tuple[int, str] | None:
    """KV bytes per token of the arm's model (all TP ranks), and where it came from: the simulator's profile, the
    model's config.json on this machine, else ``checks.kv_bytes_per_token``."""
    engine = scenario.engine_for(arm)
    base = Path(scenario.source_file).parent if scenario.source_file else None
    if engine.kind == "sim":
        got = sim_profile_estimate(engine, arm, base)
        if isinstance(got, GpuKv) and got.bytes_per_token:
            return got.bytes_per_token, got.source.split(":", 1)[0]
    else:
        path, bpt = _model_config(engine, base)
        if path is not None and bpt:
            return bpt, str(path)
    declared = scenario.checks.kv_bytes_per_token
    return (declared, "checks.kv_bytes_per_token") if declared else None


# --- the item -------------------------------------------------------------------------------------------------------

def capacity_message(tier_bytes: int, gpu_bytes: int, gpu_source: str, bytes_per_token: int | None, *,
                     tiered: bool = False, approx: str = "~") -> str:
    """The sentence for a mirroring CPU tier against the GPU KV cache: a warning at or below it, else its gain."""
    gpu = f"GPU KV cache {approx}{size_text(gpu_bytes)} ({gpu_source})"
    gpu_tokens = gpu_bytes // bytes_per_token if bytes_per_token else None
    if tier_bytes <= gpu_bytes:
        big = SUGGESTED_FACTOR * gpu_bytes
        text = (f"CPU tier {size_text(tier_bytes)} ≤ {gpu}: the CPU tier stores every block the GPU computes, so "
                f"one this small mirrors what the GPU already holds and adds (next to) no hits; a tier above "
                f"{size_text(gpu_bytes)} adds capacity, e.g. {SUGGESTED_FACTOR}x = {size_text(big)}")
        if gpu_tokens:
            text += (f" holds ~{tokens_text(SUGGESTED_FACTOR * gpu_tokens)} tokens, "
                     f"~{tokens_text((SUGGESTED_FACTOR - 1) * gpu_tokens)} beyond the GPU's "
                     f"~{tokens_text(gpu_tokens)}")
        if tiered:
            text += " (the CPU part of a tiered arm: the disk tier behind it still adds capacity)"
        return text
    text = f"CPU tier {size_text(tier_bytes)} is {tier_bytes / gpu_bytes:.1f}x the {gpu}"
    if gpu_tokens and bytes_per_token:
        text += (f": it holds ~{tokens_text(tier_bytes // bytes_per_token)} tokens, "
                 f"~{tokens_text((tier_bytes - gpu_bytes) // bytes_per_token)} beyond what the GPU keeps")
    return text


def _arm_item(scenario: Scenario, arm: Arm, gpu_memory_bytes: int | None) -> CheckItem:
    engine = scenario.engine_for(arm)
    tier = arm.cpu_tier_bytes()
    got = estimate_gpu_kv(scenario, arm, gpu_memory_bytes=gpu_memory_bytes)
    if not mirrors_gpu(engine, arm):
        text = (f"TensorRT-LLM's host cache takes the blocks the GPU evicts (not a copy of what it holds), so the "
                f"{size_text(tier)} host tier adds its size on top of the GPU KV cache")
        if isinstance(got, GpuKv):
            text += f" ~{size_text(got.bytes)} ({got.source})"
        return CheckItem(name=NAME, level="ok", arm=arm.name, message=text)
    if isinstance(got, Unknown):
        return CheckItem(name=NAME, level="ok", arm=arm.name,
                         message=f"cannot estimate the GPU KV cache of this arm: {'; '.join(got.missing)}. The "
                         f"CPU tier ({size_text(tier)}) is not compared with it here; after the run the fit screen "
                         "compares it with the GPU KV cache the server reports")
    approx = "at most " if got.upper_bound else "~"
    message = capacity_message(tier, got.bytes, got.source, got.bytes_per_token, tiered=arm.tier == "tiered",
                               approx=approx)
    level = "warn" if tier <= got.bytes else "ok"
    return CheckItem(name=NAME, level=level, arm=arm.name, message=message)


def check_tier_capacity(scenario: Scenario, *, gpu_memory_bytes: int | None = None) -> list[CheckItem]:
    """Each arm's CPU tier against the GPU KV cache it will have (``gpu_memory_bytes``: one GPU's memory, where
    known, for real engines)."""
    return [_arm_item(scenario, arm, gpu_memory_bytes) for arm in scenario.arms if arm.cpu_tier_bytes() > 0]
