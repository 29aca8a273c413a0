"""Shared memory (``/dev/shm``) an arm's server needs, and the container setting that provides it.

vLLM 0.32's CPU tier is ONE shared mmap, ``/dev/shm/vllm_offload_<id>.mmap``, sized to ``cpu_bytes_to_use``; vLLM
checks free space first (``check_shm_free_space``) and refuses to start with "Insufficient space in /dev/shm for CPU
KV offload shared region ...". Besides the tier, vLLM itself uses shared memory: the scheduler->worker broadcast
queue (``VLLM_MQ_MAX_CHUNK_BYTES_MB`` 16 MiB x 10 chunks) and one response queue per worker (24 MiB x 10 chunks)
in ``shm_broadcast.py``, plus NCCL's and PyTorch's intra-node buffers with tensor parallelism.

Figures (docs/engines.md):

* vLLM's own use: :data:`VLLM_OWN_BASE` (512 MiB) + :data:`VLLM_OWN_PER_RANK` (512 MiB) per TP rank;
* margin: :data:`MARGIN_BASE` (1 GiB) + :data:`MARGIN_FRACTION` (5 %) of the tier;
* floor: :data:`FLOOR` (16 GiB, the harness's earlier fixed ``shm_size``) so a baseline gets no less than before.

``shm_size`` is a tmpfs limit, not an allocation: sizing it generously costs nothing until the tier is written.
TensorRT-LLM's host cache is pinned memory, not ``/dev/shm``; NVIDIA runs its containers with ``--ipc host``.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.config.arms import Arm
from harness.config.engine import EngineSpec
from harness.engines.sizes import GIB, MIB, human_bytes, parse_docker_size

VLLM_OWN_BASE = 512 * MIB
VLLM_OWN_PER_RANK = 512 * MIB
MARGIN_BASE = GIB
MARGIN_FRACTION = 0.05
FLOOR = 16 * GIB


@dataclass(frozen=True)
class ShmNeed:
    """What one arm needs in ``/dev/shm`` and what the container gets."""

    tier_bytes: int          # the CPU tier's shared region (0 when the tier is not in /dev/shm)
    own_bytes: int           # the engine's own shared-memory use
    need_bytes: int          # tier + own: less than this and the engine refuses to start (or fails later)
    size_bytes: int | None   # the container's shm_size (None: ipc host, or not a container)
    ipc_host: bool
    explicit: bool           # engine.shm_size was set by the scenario
    why: str                 # how the figure was made, for the plan

    def shortfall(self) -> int:
        """Bytes the explicit container size lacks for the tier plus the engine's own use (0 when it fits)."""
        if self.size_bytes is None:
            return 0
        return max(0, self.need_bytes - self.size_bytes)


def shm_tier_bytes(engine: EngineSpec, arm: Arm) -> int:
    """Bytes of the arm's CPU tier that live in ``/dev/shm`` (vLLM and the vLLM-flavoured simulator only)."""
    vllm_like = engine.kind == "vllm" or (engine.kind == "sim" and engine.sim_flavor == "vllm")
    return arm.cpu_tier_bytes() if vllm_like else 0


def recommended_bytes(tier: int, own: int) -> int:
    """Tier + own use + margin, rounded up to a MiB, never below the floor."""
    raw = tier + own + MARGIN_BASE + int(MARGIN_FRACTION * tier)
    return max(FLOOR, -(-raw // MIB) * MIB)


def shm_need(engine: EngineSpec, arm: Arm) -> ShmNeed:
    """The arm's shared-memory figures (container size from the tier unless the scenario sets one)."""
    tier = shm_tier_bytes(engine, arm)
    own = VLLM_OWN_BASE + VLLM_OWN_PER_RANK * engine.tensor_parallel_size if engine.kind == "vllm" else 0
    need = tier + own
    docker = engine.effective_launcher == "docker"
    ipc_host = engine.ipc == "host" or (engine.ipc is None and engine.kind == "trtllm")
    parts = [f"CPU tier {human_bytes(tier)}"] if tier else []
    if own:
        parts.append(f"vLLM's own {human_bytes(own)} ({engine.tensor_parallel_size} TP rank(s))")
    base = " + ".join(parts) or "no CPU tier in /dev/shm"
    if not docker:
        return ShmNeed(tier, own, need, None, False, False, f"{base}: needs {human_bytes(need)} free in the host's "
                       "/dev/shm (local process)")
    if ipc_host and engine.kind == "trtllm":
        return ShmNeed(tier, own, need, None, True, False, "ipc host (NVIDIA's documented container setting); "
                       "TensorRT-LLM's host cache is pinned host memory, not /dev/shm")
    if ipc_host:
        return ShmNeed(tier, own, need, None, True, False, f"{base}: ipc host, the container shares the host's "
                       f"/dev/shm (needs {human_bytes(need)} free there)")
    if engine.shm_size is not None:
        size = parse_docker_size(engine.shm_size)
        return ShmNeed(tier, own, need, size, False, True, f"{base} = {human_bytes(need)}; engine.shm_size "
                       f"{engine.shm_size} = {human_bytes(size)}")
    size = recommended_bytes(tier, own)
    return ShmNeed(tier, own, need, size, False, False, f"{base} + margin 1 GiB + 5% of the tier (floor 16 GiB) "
                   f"= shm_size {human_bytes(size)}")
