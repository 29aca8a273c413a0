"""The replay's step clock and its run through the simulator's offload tiers.

Both sides (this module and ``scripts/vllm_replay.py``, inside vLLM) run one schedule, step ``t = 0, 1, ...``:

1. what finished is collected: loads prepared at ``t - 1`` complete, stores prepared at ``t - 2`` complete (vLLM:
   ``complete_load`` / ``complete_store``, which starts the fs cascade; fs jobs submitted at ``t - 1`` are done);
2. ``arrivals_per_step`` new requests join the waiting queue (arrival order);
3. the queue is walked in order (vLLM's FCFS waiting queue): a request whose load completed is scheduled; any
   other is looked up: deferred (a chunk is pending or being loaded; after ``max_defers`` deferrals it is
   aborted), loading (an external hit: ``prepare_load``, it is scheduled at ``t + 1``) or scheduled now;
4. stores, as vLLM's ``build_connector_meta``: every request scheduled now offers its prompt chunks not yet
   stored (from the end of its hit), then every request scheduled at ``t - 1`` finishes: it offers the rest of its
   chunks (none with ``offload_prompt_only``, but those a failed offer left) and ends (``on_request_finished``),
   as do requests aborted now; the step ends (vLLM's ``on_schedule_end``: the fs tier's existence probes of the
   step are answered, for the next step).

The simulator's transfers get fixed step latencies, as vLLM's managers have no time: device-to-host copies take
1.5 steps (a store is pending during ``t + 1``), host-to-device loads and disk reads 0.5 steps (a promotion made at
``t`` is loadable at ``t + 1``), disk writes 1 step (a cascaded chunk is held until ``t + 2.5``, as vLLM pins it until
the cascade's completion is seen at ``t + 3``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from harness.sim.cache.policy import ArcPolicy, LruPolicy
from harness.sim.config import CPU_SPEC, TIERING_SPEC, EngineConfig, FsConfig, OffloadConfig
from harness.sim.offload import DEFER, ExternalHit, OffloadManager
from harness.sim.profile import ComputeSpec, DiskSpec, LinkSpec
from harness.sim.transfer import DiskQueue, Link
from tools.sim_oracle.sequence import ReplayRequest, ReplaySequence

D2H_STEPS, H2D_STEPS, DISK_READ_STEPS, DISK_WRITE_STEPS = 1.5, 0.5, 0.5, 1.0
IDLE_STEPS = 3  # steps run after the last request, so every store and cascade completes


@dataclass(frozen=True)
class ReplayConfig:
    """One offload configuration to replay a sequence under."""

    name: str
    policy: str = "lru"
    store_threshold: int = 0
    capacity_chunks: int = 64
    tiered: bool = False
    offload_prompt_only: bool = True
    arrivals_per_step: int = 4
    max_defers: int = 6

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass
class Outcome:
    """What happened to one request (keys in the order they happened)."""

    id: str
    step: int = -1  # when its lookup was settled (-1: never, aborted)
    defers: int = 0
    aborted: bool = False
    hit: list[int] = field(default_factory=list)
    hit_disk: list[int] = field(default_factory=list)
    stored: list[int] = field(default_factory=list)
    evicted: list[int] = field(default_factory=list)
    promoted: list[int] = field(default_factory=list)
    cascaded: list[int] = field(default_factory=list)
    alloc_failures: int = 0
    promote_failures: int = 0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Outcome:
        return cls(**{f.name: data[f.name] for f in fields(cls)})


@dataclass
class ReplayResult:
    """One side's replay of one sequence under one configuration."""

    sequence: str
    config: str
    outcomes: list[Outcome]
    final: dict[str, Any]  # the CPU tier's order (and ARC's state), the fs tier's keys
    lookups: int = 0
    steps: int = 0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReplayResult:
        return cls(data["sequence"], data["config"], [Outcome.from_json(o) for o in data["outcomes"]],
                   data["final"], int(data.get("lookups", 0)), int(data.get("steps", 0)))


class _StepLink(Link):
    """A link with a fixed latency and no queueing (the replay's step clock)."""

    def __init__(self, latency: float) -> None:
        super().__init__(1.0, latency)

    def submit(self, now: float, nbytes: int, not_before: float = 0.0) -> tuple[float, float]:
        start = max(now, not_before)
        return start, start + self.latency_s


class _StepDisk(DiskQueue):
    """A disk with a fixed latency per job and no queueing."""

    def __init__(self, latency: float) -> None:
        super().__init__(1.0, latency, 1)

    def submit(self, now: float, n_files: int, nbytes: int) -> tuple[float, float]:
        return now, now + self.latency_s


def manager(seq: ReplaySequence, cfg: ReplayConfig, fs_root: Path | None) -> OffloadManager:
    """The simulator's offload tiers for a replay: one modelled byte per token, step-clock transfers."""
    k = seq.blocks_per_chunk
    chunk_bytes = seq.block_tokens * k
    fs = FsConfig(root_dir=str(fs_root)) if cfg.tiered and fs_root is not None else None
    off_cfg = OffloadConfig(spec_name=TIERING_SPEC if fs else CPU_SPEC, cpu_bytes=cfg.capacity_chunks * chunk_bytes,
                            chunk_blocks=k, eviction_policy=cfg.policy, offload_prompt_only=cfg.offload_prompt_only,
                            store_threshold=cfg.store_threshold, fs=fs)
    compute = ComputeSpec(step_overhead_s=0.0, prefill_s_per_token=0.0, prefill_s_per_token_ctx=0.0,
                          decode_s_per_seq=0.0, decode_s_per_ctx_token=0.0)
    engine = EngineConfig(model_name="oracle", block_size=seq.block_tokens, num_gpu_blocks=1, max_num_seqs=1,
                          max_num_batched_tokens=1, max_model_len=1, kv_bytes_per_token=1,
                          enable_prefix_caching=True, compute=compute,
                          link=LinkSpec(h2d_bytes_per_s=1.0, d2h_bytes_per_s=1.0),
                          disk=DiskSpec(read_bytes_per_s=1.0, write_bytes_per_s=1.0, read_latency_s=0.0),
                          offload=off_cfg)
    off = OffloadManager(engine, off_cfg, namespace=0x0AC1E)
    off.h2d, off.d2h = _StepLink(H2D_STEPS), _StepLink(D2H_STEPS)
    if off.fs is not None:
        off.disk_read, off.disk_write = _StepDisk(DISK_READ_STEPS), _StepDisk(DISK_WRITE_STEPS)
    return off


def final_state(off: OffloadManager) -> dict[str, Any]:
    """The CPU tier's replacement state (LRU: least recent first; ARC: T1, T2, B1, B2, target) and the fs keys."""
    policy = off.cpu.policy
    state: dict[str, Any] = {"fs": sorted(off.fs.index) if off.fs is not None else []}
    if isinstance(policy, LruPolicy):
        state["lru"] = policy.resident()
    elif isinstance(policy, ArcPolicy):
        state["arc"] = {"t1": list(policy.t1), "t2": list(policy.t2), "b1": list(policy.b1), "b2": list(policy.b2),
                        "target": policy.target_t1}
    return state


@dataclass
class _Req:
    spec: ReplayRequest
    blocks: list[int]
    out: Outcome
    state: str = "waiting"  # waiting | loading | loaded
    next_chunk: int = 0
    hit: ExternalHit | None = None


def replay_sim(seq: ReplaySequence, cfg: ReplayConfig, fs_root: Path | None = None) -> ReplayResult:
    """Replay ``seq`` through the simulator's offload tiers on the step clock (see the module docstring)."""
    off = manager(seq, cfg, fs_root)
    k = seq.blocks_per_chunk
    reqs = {r.id: _Req(r, [key for c in r.chunks[: r.prompt_chunks] for key in (*[0] * (k - 1), c)], Outcome(r.id))
            for r in seq.requests}
    events = {"store": "stored", "evict": "evicted", "promote": "promoted", "cascade": "cascaded"}

    def trace(req_id: str, event: str, keys: list[int]) -> None:
        out = reqs[req_id].out
        if event == "promote_fail":
            out.promote_failures += len(keys)
        elif event in events:
            getattr(out, events[event]).extend(keys)

    off.trace = trace
    arrivals = deque(reqs.values())
    waiting: list[_Req] = []
    finishing: list[_Req] = []
    lookups = 0
    t = idle = 0
    while idle < IDLE_STEPS:
        now = float(t)
        off.now = now
        for r in waiting:
            if r.state == "loading" and r.hit is not None and r.hit.ready_at <= now:
                off.finish_load(r.hit)
                r.state = "loaded"
        for _ in range(min(cfg.arrivals_per_step, len(arrivals))):
            waiting.append(arrivals.popleft())
        scheduled: list[_Req] = []
        aborted: list[_Req] = []
        still: list[_Req] = []
        for r in waiting:
            if r.state == "loading":
                still.append(r)
                continue
            if r.state == "loaded":
                scheduled.append(r)
                continue
            lookups += 1
            found = off.lookup(r.spec.id, r.blocks, r.spec.gpu_blocks, len(r.blocks), now)
            if found == DEFER:
                r.out.defers += 1
                if r.out.defers > cfg.max_defers:
                    r.out.aborted = True
                    aborted.append(r)
                else:
                    still.append(r)
                continue
            r.out.step = t
            if isinstance(found, ExternalHit):
                r.out.hit = list(found.keys)
                r.out.hit_disk = [key for key in found.keys if key in found.disk_keys]
                r.next_chunk = found.first_chunk + len(found.keys)
                off.start_load(found, now)
                r.hit, r.state = found, "loading"
                still.append(r)
            else:
                off.admitted(r.spec.id)
                scheduled.append(r)
        waiting = still
        for r in scheduled:
            _offer(off, r, r.spec.prompt_chunks, now)
        for r in finishing:
            _offer(off, r, r.spec.prompt_chunks if cfg.offload_prompt_only else len(r.spec.chunks), now)
        for r in (*finishing, *aborted):
            off.finish_request(r.spec.id)
        off.end_step(now)
        finishing = scheduled
        idle = 0 if arrivals or waiting or finishing else idle + 1
        t += 1
    return ReplayResult(seq.name, cfg.name, [r.out for r in reqs.values()], final_state(off), lookups, t)


def _offer(off: OffloadManager, r: _Req, upto: int, now: float) -> None:
    """Offer the request's chunks ``[next_chunk, upto)`` for storing; a failed offer is made again later."""
    if upto <= r.next_chunk:
        return
    end = off.store_chunks(r.spec.id, list(r.spec.chunks[r.next_chunk:upto]), r.next_chunk, now)
    if end is None:
        r.out.alloc_failures += 1
        return
    r.next_chunk = upto
