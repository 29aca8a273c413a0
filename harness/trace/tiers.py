"""GPU + CPU (+ disk) tier splits read off the exact LRU curve.

Every tier is modelled as LRU over the same block stream, so the curve answers "what would each tier hit":

- ``inclusive`` (default; vLLM's CPU offloading and LMCache store every computed block in the CPU tier, so
  it holds a superset of the GPU's recent blocks): the GPU hits ``H(G)``, the CPU tier adds
  ``H(max(G, C)) - H(G)`` and disk adds ``H(max(G, C, D)) - H(max(G, C))``.  A CPU tier no larger than the GPU
  cache adds nothing.
- ``exclusive`` (blocks move down a tier on eviction, as TensorRT-LLM's host offload does): the tiers act as one
  LRU of ``G + C + D`` blocks: the CPU adds ``H(G + C) - H(G)`` and disk ``H(G + C + D) - H(G + C)``.

``H`` counts leading-prefix hits, so this is an upper bound for engines whose GPU cache also pins running
requests' blocks or evicts in a different order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from harness.trace.lru_curve import LruCurve
from harness.trace.units import Capacity

TierMode = Literal["inclusive", "exclusive"]


@dataclass(frozen=True)
class TierSpec:
    """The GPU KV cache, one or more CPU tier sizes to compare, an optional disk tier, and how tiers nest."""

    gpu: Capacity
    cpu: tuple[Capacity, ...] = ()
    disk: Capacity | None = None
    mode: TierMode = "inclusive"


def _reach(mode: TierMode, gpu: int, cpu: int, disk: int) -> tuple[int, int, int]:
    """Capacities (blocks) whose LRU hits end at the GPU, CPU and disk tier."""
    if mode == "exclusive":
        return gpu, gpu + cpu, gpu + cpu + disk
    return gpu, max(gpu, cpu), max(gpu, cpu, disk)


def _capacity_doc(cap: Capacity | None, blocks: int, block_bytes: int | None) -> dict[str, Any]:
    return {
        "given": cap.text if cap is not None else None,
        "blocks": blocks,
        "bytes": blocks * block_bytes if block_bytes is not None else None,
    }


def tier_split_row(curve: LruCurve, spec: TierSpec, cpu: Capacity | None, block_bytes: int | None) -> dict[str, Any]:
    """One row: where each tier's hits land for the GPU cache, the given CPU tier and the disk tier."""
    g = spec.gpu.to_blocks(block_bytes)
    c = cpu.to_blocks(block_bytes) if cpu is not None else 0
    d = spec.disk.to_blocks(block_bytes) if spec.disk is not None else 0
    r_gpu, r_cpu, r_disk = _reach(spec.mode, g, c, d)
    blocks = [curve.blocks_at(r) for r in (r_gpu, r_cpu, r_disk)]
    tokens = [curve.tokens_at(r) for r in (r_gpu, r_cpu, r_disk)]

    def split(hits: list[int], total: int) -> dict[str, float]:
        if total == 0:
            return {"gpu": 0.0, "cpu": 0.0, "disk": 0.0, "miss": 0.0}
        return {
            "gpu": hits[0] / total,
            "cpu": (hits[1] - hits[0]) / total,
            "disk": (hits[2] - hits[1]) / total,
            "miss": (total - hits[2]) / total,
        }

    by_blocks = split(blocks, curve.total_blocks)
    by_tokens = split(tokens, curve.total_tokens)
    return {
        "gpu": _capacity_doc(spec.gpu, g, block_bytes),
        "cpu": _capacity_doc(cpu, c, block_bytes),
        "disk": _capacity_doc(spec.disk, d, block_bytes),
        "hit_ratio": by_blocks,
        "token_hit_ratio": by_tokens,
        "gpu_only_hit_ratio": by_blocks["gpu"],
        "cpu_adds_hit_ratio": by_blocks["cpu"],
        "cpu_adds_token_hit_ratio": by_tokens["cpu"],
        "total_hit_ratio": 1.0 - by_blocks["miss"] if curve.total_blocks else 0.0,
    }


def tier_splits(curve: LruCurve, spec: TierSpec, block_bytes: int | None) -> dict[str, Any]:
    """The ``tiers`` document: the mode and one row per CPU tier size (GPU only when none is given)."""
    cpus: tuple[Capacity | None, ...] = spec.cpu if spec.cpu else (None,)
    return {
        "mode": spec.mode,
        "rows": [tier_split_row(curve, spec, cpu, block_bytes) for cpu in cpus],
    }
