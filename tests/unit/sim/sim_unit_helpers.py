"""Helpers for the simulator's unit tests: small engine configs and a fake-clock driver."""

from __future__ import annotations

from pathlib import Path

from harness.sim.config import EngineConfig, FsConfig, OffloadConfig
from harness.sim.profile import ComputeSpec, DiskSpec, LinkSpec
from harness.sim.scheduler import EngineCore

COMPUTE = ComputeSpec(step_overhead_s=0.01, prefill_s_per_token=1e-4, prefill_s_per_token_ctx=1e-8,
                      decode_s_per_seq=1e-4, decode_s_per_ctx_token=1e-7)
LINK = LinkSpec(h2d_bytes_per_s=1e9, d2h_bytes_per_s=1e9, latency_s=1e-5)
DISK = DiskSpec(read_bytes_per_s=2e8, write_bytes_per_s=1e8, read_latency_s=1e-4, write_latency_s=0.0)
KV_BYTES_PER_TOKEN = 1000
BLOCK = 4


def make_cfg(
    num_blocks: int = 64,
    *,
    cpu_chunks: int | None = None,
    fs_root: Path | None = None,
    fs_max_chunks: int | None = None,
    policy: str = "lru",
    store_mode: str = "write_through",
    chunk_blocks: int = 1,
    max_num_seqs: int = 16,
    max_num_batched_tokens: int = 256,
    max_model_len: int = 256,
    enable_prefix_caching: bool = True,
) -> EngineConfig:
    offload = None
    block_bytes = BLOCK * KV_BYTES_PER_TOKEN
    if cpu_chunks is not None:
        fs = None
        if fs_root is not None:
            fs = FsConfig(root_dir=str(fs_root), n_read_threads=4, n_write_threads=4,
                          max_bytes=None if fs_max_chunks is None else fs_max_chunks * block_bytes * chunk_blocks)
        offload = OffloadConfig(
            spec_name="TieringOffloadingSpec" if fs else "CPUOffloadingSpec",
            cpu_bytes=cpu_chunks * block_bytes * chunk_blocks, chunk_blocks=chunk_blocks,
            eviction_policy=policy, store_mode=store_mode,  # type: ignore[arg-type]
            fs=fs,
        )
    return EngineConfig(
        model_name="unit", block_size=BLOCK, num_gpu_blocks=num_blocks, max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens, max_model_len=min(max_model_len, num_blocks * BLOCK),
        kv_bytes_per_token=KV_BYTES_PER_TOKEN, enable_prefix_caching=enable_prefix_caching, compute=COMPUTE,
        link=LINK, disk=DISK, offload=offload, kv_cache_bytes=num_blocks * block_bytes,
    )


def drive(core: EngineCore, now: float = 0.0, max_iters: int = 200_000) -> float:
    """Run the core with a fake clock until it is idle; returns the final modelled time."""
    for _ in range(max_iters):
        if not core.has_work():
            return now
        plan = core.schedule(now)
        if plan is None:
            wake = core.next_wakeup()
            assert wake is not None, "engine stuck: work but nothing schedulable and nothing pending"
            now = max(now, wake)
            continue
        core.complete(plan)
        now = plan.end
    raise AssertionError("engine did not become idle")

