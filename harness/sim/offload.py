"""Offload tiers behind the GPU: lookups, promotions, loads, stores and cascades, as vLLM 0.32's offloading
connector drives its ``CPUOffloadingManager`` / ``TieringOffloadingManager``, with modelled times.

Chunks: the tiers hold chunks of ``chunk_blocks`` GPU blocks (vLLM's offloaded ``block_size``), keyed by the hash
of the chunk's last block. Every call names its request (``req_id``): what a request stored or reused reaches the
replacement policy when it finishes (:meth:`finish_request`), as in vLLM.

Lookup (a request's admission): from chunk ``gpu_blocks // chunk_blocks`` over its full chunks, each chunk is

- ready in the CPU tier: a hit;
- in the CPU tier but its store has not ended: pending (vLLM's ``HIT_PENDING``);
- tiered, and not yet known to be on disk: pending (vLLM's ``RETRY``: its asynchronous existence check answers
  at the end of the engine step, :mod:`harness.sim.cache.probe`; the answer is then kept while a request that
  asked is alive);
- tiered, and a file in the fs tier: a promotion starts (room is made in the CPU tier as for a store, the chunk
  is pending until the disk read ends; no room: a miss), pending;
- else a miss, which ends the walk.

Any pending chunk defers the whole request (:data:`DEFER`; it is tried again later and then finds its chunks in
the CPU tier), as does a hit chunk another request is loading. A hit shorter than one chunk beyond the GPU hit is
no hit. A hit may reach the last full chunk of the prompt; the scheduler then recomputes the last token.
Chunks promoted for a request count as its disk hits (vLLM's load source), the rest as CPU hits.

Load: the hit chunks are pinned and copied over the shared host-to-device link (FIFO, so concurrent loads contend).

Stores (``write_through``, vLLM): each step, the newly computed full prompt chunks (all chunks with
``offload_prompt_only`` false) go through the CPU tier's ``prepare_store``; the chunks stored are copied over the
device-to-host link and become loadable when the copy ends. An allocation failure stores nothing and the same
chunks are offered again next step. With an fs tier every stored chunk is then written to disk too (vLLM's
write-through cascade: "always offload to all tiers"), after its copy ends; the CPU chunk is held until the disk
write ends. A CPU eviction only drops the CPU copy. ``on_evict`` (TensorRT-LLM host offload) stores a block when the
GPU evicts it instead, and the step that evicted it waits for the copy.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from harness.sim.cache.cpu import HIT, MISS, PENDING, CpuTier, RequestAccess
from harness.sim.cache.fs import FsTier
from harness.sim.cache.probe import FsProbes
from harness.sim.config import ConfigError, EngineConfig, OffloadConfig
from harness.sim.transfer import DiskQueue, Link

PRIMARY = "0:primary"
FS = "1:fs"
# Back-pressure: a cascade submitted while the disk's write queue already holds this much modelled work is dropped
# (counted as vLLM's kv_offload_tiering_backpressure_{stores,blocks}_dropped). Real vLLM drops only with a
# back-pressure detector configured, otherwise it queues; the bound is generous so only a disk that cannot keep up
# at all reaches it.
MAX_WRITE_BACKLOG_S = 30.0
FS_PROBE_S = 1e-3
"""When an idle engine asks again after its fs tier's probes were answered (vLLM steps again at once: ~a ms)."""
DEFER = "defer"
Tracer = Callable[[str, str, list[int]], None]
"""``trace(req_id, event, keys)``, event ``store``, ``evict``, ``promote``, ``promote_fail``, ``cascade`` or
``alloc_fail``: what each request's calls did (the differential replay of ``tools/sim_oracle`` records it)."""


@dataclass
class OffloadStats:
    """Cumulative counters (bytes are modelled bytes, times modelled seconds)."""

    load_bytes: int = 0
    load_time_s: float = 0.0
    store_bytes: int = 0
    store_time_s: float = 0.0
    allocation_failures: int = 0
    promotion_allocation_failures: int = 0
    read_bytes: dict[str, int] = field(default_factory=lambda: {PRIMARY: 0, FS: 0})
    read_time_s: dict[str, float] = field(default_factory=lambda: {PRIMARY: 0.0, FS: 0.0})
    write_bytes: dict[str, int] = field(default_factory=lambda: {PRIMARY: 0, FS: 0})
    write_time_s: dict[str, float] = field(default_factory=lambda: {PRIMARY: 0.0, FS: 0.0})
    chunk_queries: dict[str, int] = field(default_factory=lambda: {PRIMARY: 0, FS: 0})
    chunk_hits: dict[str, int] = field(default_factory=lambda: {PRIMARY: 0, FS: 0})
    cascade_failures: int = 0
    stores_dropped: dict[str, int] = field(default_factory=lambda: {FS: 0})  # back-pressure: write queue full
    blocks_dropped: dict[str, int] = field(default_factory=lambda: {FS: 0})


@dataclass
class ExternalHit:
    """Chunks a request will load from the offload tiers (``keys`` in prefix order, from chunk ``first_chunk``)."""

    start_block: int
    n_blocks: int
    cpu_blocks: int
    disk_blocks: int
    keys: list[int]
    disk_keys: set[int]
    first_chunk: int
    req_id: str
    ready_at: float = 0.0

    @property
    def cpu_keys(self) -> list[int]:
        return [key for key in self.keys if key not in self.disk_keys]


@dataclass
class _Request:
    access: RequestAccess
    from_disk: set[int] = field(default_factory=set)  # keys promoted for this request: their load source
    stores_until: float = 0.0  # when the request's last store to the CPU tier ends
    observed: dict[str, set[int]] | None = field(default_factory=lambda: {PRIMARY: set[int](), FS: set[int]()})


class OffloadManager:
    """CPU tier (+ optional fs tier) and the transfer queues between them and the GPU."""

    def __init__(self, engine: EngineConfig, cfg: OffloadConfig, namespace: int) -> None:
        self.cfg = cfg
        self.k = cfg.chunk_blocks
        self.block_bytes = engine.block_bytes
        self.chunk_bytes = self.block_bytes * self.k
        self.cpu = CpuTier(cfg.cpu_bytes // self.chunk_bytes, cfg.eviction_policy, cfg.store_threshold)
        self.h2d = Link(engine.link.h2d_bytes_per_s, engine.link.latency_s)
        self.d2h = Link(engine.link.d2h_bytes_per_s, engine.link.latency_s)
        self.fs: FsTier | None = None
        self.probes: FsProbes | None = None
        self.disk_read: DiskQueue | None = None
        self.disk_write: DiskQueue | None = None
        if cfg.fs is not None:
            try:
                self.fs = FsTier(
                    cfg.fs.root_dir, namespace, engine.block_size * self.k, self.chunk_bytes, cfg.fs.max_bytes
                )
            except OSError as exc:
                raise ConfigError(f"cannot use fs tier root_dir {cfg.fs.root_dir}: {exc.strerror or exc}") from exc
            self.probes = FsProbes(self.fs.contains)
            self.disk_read = DiskQueue(engine.disk.read_bytes_per_s, engine.disk.read_latency_s,
                                       cfg.fs.n_read_threads)
            self.disk_write = DiskQueue(engine.disk.write_bytes_per_s, engine.disk.write_latency_s,
                                        cfg.fs.n_write_threads)
        self.stats = OffloadStats()
        self._loading: dict[int, int] = {}
        self._requests: dict[str, _Request] = {}
        self._wakeups: list[float] = []
        self.trace: Tracer | None = None
        self.now = 0.0
        self.evict_store_end = 0.0

    @property
    def write_through(self) -> bool:
        return self.cfg.store_mode == "write_through"

    def _request(self, req_id: str) -> _Request:
        state = self._requests.get(req_id)
        if state is None:
            state = self._requests[req_id] = _Request(self.cpu.new_access())
        return state

    def _emit(self, req_id: str, event: str, keys: list[int]) -> None:
        if self.trace is not None and keys:
            self.trace(req_id, event, keys)

    def next_event(self) -> float | None:
        """The earliest future time a store or promotion in flight ends (a deferred request may go then)."""
        wake = self._wakeups
        while wake and wake[0] <= self.now:
            heapq.heappop(wake)
        return wake[0] if wake else None

    # ---------------------------------------------------------------- lookups, promotions and loads

    def _observe(self, state: _Request, tier: str, key: int, hit: bool) -> None:
        """vLLM's chunk query/hit counters: the first resolved lookup per request, tier and key, until admission."""
        observed = state.observed
        if observed is None or key in observed[tier]:
            return
        observed[tier].add(key)
        self.stats.chunk_queries[tier] += 1
        if hit:
            self.stats.chunk_hits[tier] += 1

    def lookup(self, req_id: str, hashes: list[int], gpu_blocks: int, max_blocks: int,
               now: float) -> ExternalHit | str | None:
        """External hit after ``gpu_blocks`` GPU-hit blocks (at most ``max_blocks``); ``None`` if none, ``DEFER``
        to try again later."""
        k = self.k
        c0 = gpu_blocks // k
        n_chunks = min(len(hashes), max_blocks) // k
        if n_chunks * k - gpu_blocks < k:  # less than one chunk beyond the GPU hit (as vLLM)
            return None
        state = self._request(req_id)
        cpu, fs = self.cpu, self.fs
        hits = 0
        pending = False
        promoted: list[int] = []
        for c in range(c0, n_chunks):
            key = hashes[c * k + k - 1]
            found = cpu.lookup(key, now)
            if found != PENDING:
                self._observe(state, PRIMARY, key, found == HIT)
            if found == MISS:
                if fs is None or self.probes is None:
                    break
                on_disk = self.probes.ask(req_id, key, now)
                if on_disk is None:  # the probe answers at the end of this step: ask again then
                    pending = True
                    continue
                if on_disk and not fs.contains(key):  # gone since (cache loss): vLLM's promotion fails
                    self.probes.forget(key)
                    on_disk = False
                self._observe(state, FS, key, on_disk)
                if not on_disk or not self._promote(req_id, state, key, c, now):
                    break
                promoted.append(key)
                found = PENDING
            hits += 1
            pending = pending or found == PENDING
        if promoted:
            self._read_promoted(promoted, now)
        if pending:
            return DEFER
        end_block = (c0 + hits) * k
        if end_block - gpu_blocks < k:
            return None
        keys = [hashes[c * k + k - 1] for c in range(c0, c0 + hits)]
        if any(key in self._loading for key in keys):
            return DEFER
        disk_keys = {key for key in keys if key in state.from_disk}
        first = k - (gpu_blocks - c0 * k)  # blocks of the first chunk beyond the GPU hit
        disk_blocks = sum(first if i == 0 else k for i, key in enumerate(keys) if key in disk_keys)
        return ExternalHit(gpu_blocks, end_block - gpu_blocks, end_block - gpu_blocks - disk_blocks, disk_blocks,
                           keys, disk_keys, c0, req_id)

    def _promote(self, req_id: str, state: _Request, key: int, pos: int, now: float) -> bool:
        """Make room for a chunk found on disk (vLLM's ``prepare_write``); False when there is none."""
        out = self.cpu.prepare_store([key], [pos], now, state.access)
        if out is None or not out.stored:
            self.stats.promotion_allocation_failures += 1
            self._emit(req_id, "promote_fail", [key])
            return False
        state.from_disk.add(key)
        self._emit(req_id, "evict", out.evicted)
        self._emit(req_id, "promote", out.stored)
        return True

    def _read_promoted(self, keys: list[int], now: float) -> None:
        """One disk read job for the chunks a lookup promoted; they are loadable when it ends."""
        assert self.disk_read is not None
        st = self.stats
        nbytes = len(keys) * self.chunk_bytes
        start, end = self.disk_read.submit(now, len(keys), nbytes)
        st.read_bytes[FS] += nbytes
        st.read_time_s[FS] += end - start
        st.write_bytes[PRIMARY] += nbytes  # staged into host memory
        self.cpu.set_ready(keys, end)
        heapq.heappush(self._wakeups, end)

    def start_load(self, hit: ExternalHit, now: float) -> float:
        """Queue the load; returns when the blocks are in GPU memory (modelled seconds)."""
        st = self.stats
        state = self._request(hit.req_id)
        state.observed = None  # admitted: later lookups (after a preemption) are not counted again
        keys = hit.keys
        self.cpu.pin(keys, state.access, range(hit.first_chunk, hit.first_chunk + len(keys)))
        nbytes = hit.n_blocks * self.block_bytes
        start, end = self.h2d.submit(now, nbytes)
        st.load_bytes += nbytes
        st.load_time_s += end - start
        st.read_bytes[PRIMARY] += nbytes
        st.read_time_s[PRIMARY] += end - start
        loading = self._loading
        for key in keys:
            loading[key] = loading.get(key, 0) + 1
        hit.ready_at = end
        return end

    def finish_load(self, hit: ExternalHit) -> None:
        """The load ended (or its request went away): unpin."""
        keys = hit.keys
        self.cpu.unpin(keys)
        loading = self._loading
        for key in keys:
            n = loading.get(key, 0) - 1
            if n <= 0:
                loading.pop(key, None)
            else:
                loading[key] = n

    def admitted(self, req_id: str) -> None:
        """The request was scheduled without a load: its lookups stop counting."""
        self._request(req_id).observed = None

    def finish_request(self, req_id: str) -> None:
        """The request finished or went away: its accesses reach the replacement policy (and its fs probes are
        released once its stores have completed)."""
        state = self._requests.pop(req_id, None)
        if state is not None:
            self.cpu.finish_request(state.access)
            if self.probes is not None:
                self.probes.release(req_id, state.stores_until, self.now)

    def end_step(self, now: float) -> None:
        """The scheduler's step ends: the fs tier's probes of this step are answered."""
        if self.probes is not None and self.probes.end_step(now):
            heapq.heappush(self._wakeups, now + FS_PROBE_S)

    # ---------------------------------------------------------------- stores and cascades

    def store_chunks(self, req_id: str, keys: list[int], first_chunk: int, now: float) -> float | None:
        """Offer newly computed chunks (``first_chunk`` is the first one's position); returns when their copy ends,
        ``now`` if nothing needed copying, ``None`` on an allocation failure (offer them again later)."""
        state = self._request(req_id)
        out = self.cpu.prepare_store(keys, range(first_chunk, first_chunk + len(keys)), now, state.access)
        if out is None:
            self.stats.allocation_failures += 1
            self._emit(req_id, "alloc_fail", keys)
            return None
        self._emit(req_id, "evict", out.evicted)
        if not out.stored:
            return now
        self._emit(req_id, "store", out.stored)
        end = self._d2h(len(out.stored), now)
        state.stores_until = max(state.stores_until, end)
        self.cpu.set_ready(out.stored, end)
        heapq.heappush(self._wakeups, end)
        self._cascade(out.stored, end, req_id)
        return end

    def store_evicted(self, key: int) -> None:
        """Offload-on-eviction: the GPU evicts a block; copy it to the CPU tier (the step waits for it)."""
        cpu = self.cpu
        if key in cpu:
            return
        out = cpu.prepare_store([key], [0], self.now, cpu.new_access())
        if out is None or not out.stored:
            self.stats.allocation_failures += 1
            return
        end = self._d2h(1, self.now)
        cpu.set_ready(out.stored, end)
        self.evict_store_end = max(self.evict_store_end, end)

    def _d2h(self, n_chunks: int, now: float) -> float:
        st = self.stats
        nbytes = n_chunks * self.chunk_bytes
        start, end = self.d2h.submit(now, nbytes)
        st.store_bytes += nbytes
        st.store_time_s += end - start
        st.write_bytes[PRIMARY] += nbytes
        st.write_time_s[PRIMARY] += end - start
        return end

    def _cascade(self, stored: list[int], after: float, req_id: str = "") -> None:
        """Write-through to the fs tier of chunks whose CPU copy ends at ``after``; held in the CPU tier until the
        disk write ends."""
        fs = self.fs
        if fs is None or not stored:
            return
        assert self.disk_write is not None
        new = [key for key in stored if key not in fs.index]
        if self.disk_write.free_at - after > MAX_WRITE_BACKLOG_S:  # write queue full: the store is dropped
            if new:
                self.stats.stores_dropped[FS] += 1
                self.stats.blocks_dropped[FS] += len(new) * self.k
            return
        self._emit(req_id, "cascade", stored)
        written, _evicted = fs.write_many(new)  # one check of the segment and one write for the whole cascade
        self.stats.cascade_failures += len(new) - written
        end = after
        if written:
            nbytes = written * self.chunk_bytes
            start, end = self.disk_write.submit(after, written, nbytes)
            self.stats.write_bytes[FS] += nbytes
            self.stats.write_time_s[FS] += end - start
        self.cpu.hold(stored, end)

    # ---------------------------------------------------------------- admin

    def reset_cache(self) -> bool:
        """vLLM 0.32's connector reset (``reset_prefix_cache?reset_external=true``): the CPU tier loses every chunk;
        the fs tier keeps its files, as ``TieringOffloadingManager.reset_cache`` keeps its secondary tiers. With a
        load in flight nothing is reset and False is returned (vLLM flushes it instead; the GPU side of its reset
        fails then anyway, the loading request holding blocks)."""
        if self._loading:
            return False
        self.cpu.reset()
        return True

    def cache_loss(self) -> int:
        """Delete the fs tier's files (real cache loss); returns how many were deleted."""
        return self.fs.delete_own_files() if self.fs is not None else 0

    def active_promotions(self, now: float) -> int:
        return self.disk_read.active_jobs(now) if self.disk_read is not None else 0

    def active_cascades(self, now: float) -> int:
        return self.disk_write.active_jobs(now) if self.disk_write is not None else 0
