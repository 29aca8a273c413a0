"""Offload tiers behind the GPU: lookups, promotions (loads), stores and cascades, with their accounting.

Chunks: the tiers hold chunks of ``chunk_blocks`` GPU blocks (vLLM's offloaded ``block_size``), keyed by the
hash of the chunk's last block. For a request whose first ``g`` blocks hit in the GPU, the lookup starts at
chunk ``g // chunk_blocks`` and walks chunks while each is either in the CPU tier (ready) or, when tiered,
in the fs tier; the first miss ends the external hit. Hits are capped so the last prompt token is computed.

Promotion (the request waits for it; TTFT includes it):

- CPU hit: ``H2D`` job of ``blocks x block_bytes`` on the shared host-to-device link (FIFO, so concurrent
  promotions contend).
- disk hit: a disk read job (``n`` files, ``n x chunk_bytes``) on the disk queue, staged into the CPU tier
  (which may evict and cascade), then the H2D job, which cannot start before the read ends.

Stores: ``write_through`` (vLLM) copies each newly computed full prompt chunk not yet in the CPU tier, one D2H
job per request per step; ``on_evict`` (TensorRT-LLM host offload) copies a block when the GPU evicts it, and
the step that evicted it waits for the copy. CPU-tier evictions cascade to the fs tier when tiered (a file is
written, a disk write job is queued). A chunk being loaded is pinned in the CPU tier; a request whose hit
chunks are being loaded by another request waits (vLLM defers it) and then hits them in the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.sim.cache.cpu import CpuTier
from harness.sim.cache.fs import FsTier
from harness.sim.config import ConfigError, EngineConfig, OffloadConfig
from harness.sim.transfer import DiskQueue, Link

PRIMARY = "0:primary"
FS = "1:fs"
# Back-pressure: a cascade submitted while the disk's write queue already holds this much modelled work is dropped
# (counted as vLLM's kv_offload_tiering_backpressure_{stores,blocks}_dropped). Real vLLM drops only with a
# back-pressure detector configured, otherwise it queues; the bound is generous so only a disk that cannot keep up
# at all reaches it.
MAX_WRITE_BACKLOG_S = 30.0


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
    """Blocks a request will load from the offload tiers."""

    start_block: int
    n_blocks: int
    cpu_blocks: int
    disk_blocks: int
    cpu_keys: list[int]
    disk_keys: list[int]
    ready_at: float = 0.0


DEFER = "defer"


class OffloadManager:
    """CPU tier (+ optional fs tier) and the transfer queues between them and the GPU."""

    def __init__(self, engine: EngineConfig, cfg: OffloadConfig, namespace: int) -> None:
        self.cfg = cfg
        self.k = cfg.chunk_blocks
        self.block_bytes = engine.block_bytes
        self.chunk_bytes = self.block_bytes * self.k
        self.cpu = CpuTier(cfg.cpu_bytes // self.chunk_bytes, cfg.eviction_policy)
        self.h2d = Link(engine.link.h2d_bytes_per_s, engine.link.latency_s)
        self.d2h = Link(engine.link.d2h_bytes_per_s, engine.link.latency_s)
        self.fs: FsTier | None = None
        self.disk_read: DiskQueue | None = None
        self.disk_write: DiskQueue | None = None
        if cfg.fs is not None:
            try:
                self.fs = FsTier(
                    cfg.fs.root_dir, namespace, engine.block_size * self.k, self.chunk_bytes, cfg.fs.max_bytes
                )
            except OSError as exc:
                raise ConfigError(f"cannot use fs tier root_dir {cfg.fs.root_dir}: {exc.strerror or exc}") from exc
            self.disk_read = DiskQueue(engine.disk.read_bytes_per_s, engine.disk.read_latency_s,
                                       cfg.fs.n_read_threads)
            self.disk_write = DiskQueue(engine.disk.write_bytes_per_s, engine.disk.write_latency_s,
                                        cfg.fs.n_write_threads)
        self.stats = OffloadStats()
        self._loading: dict[int, int] = {}
        self.now = 0.0
        self.evict_store_end = 0.0

    @property
    def write_through(self) -> bool:
        return self.cfg.store_mode == "write_through"

    # ---------------------------------------------------------------- lookups and loads

    def lookup(self, hashes: list[int], gpu_blocks: int, max_blocks: int, now: float) -> ExternalHit | str | None:
        """External hit after ``gpu_blocks`` GPU-hit blocks; ``None`` if none, ``DEFER`` to retry later."""
        k = self.k
        c0 = gpu_blocks // k
        n_chunks = len(hashes) // k
        if n_chunks * k - gpu_blocks < k:  # less than one chunk beyond the GPU hit (as vLLM)
            return None
        cpu, fs = self.cpu, self.fs
        for c in range(n_chunks):  # a lookup refreshes every chunk of the request (vLLM touches them all)
            cpu.touch(hashes[c * k + k - 1])
        found: list[tuple[int, bool]] = []
        q_cpu = q_fs = 0
        for c in range(c0, n_chunks):
            if c * k >= max_blocks:
                break
            key = hashes[c * k + k - 1]
            q_cpu += 1
            if cpu.is_ready(key, now):
                found.append((key, True))
                continue
            if fs is None:
                break
            q_fs += 1
            if fs.contains(key):
                found.append((key, False))
                continue
            break
        if any(key in self._loading for key, _on_cpu in found):
            return DEFER
        st = self.stats
        st.chunk_queries[PRIMARY] += q_cpu
        st.chunk_queries[FS] += q_fs
        end_block = min((c0 + len(found)) * k, max_blocks)
        n_blocks = end_block - gpu_blocks
        if n_blocks <= 0:
            return None
        cpu_keys: list[int] = []
        disk_keys: list[int] = []
        cpu_blocks = disk_blocks = 0
        for i, (key, on_cpu) in enumerate(found):
            lo = max((c0 + i) * k, gpu_blocks)
            hi = min((c0 + i + 1) * k, end_block)
            if hi <= lo:
                break
            if on_cpu:
                cpu_keys.append(key)
                cpu_blocks += hi - lo
            else:
                disk_keys.append(key)
                disk_blocks += hi - lo
        st.chunk_hits[PRIMARY] += len(cpu_keys)
        st.chunk_hits[FS] += len(disk_keys)
        return ExternalHit(gpu_blocks, n_blocks, cpu_blocks, disk_blocks, cpu_keys, disk_keys)

    def start_load(self, hit: ExternalHit, now: float) -> float:
        """Queue the promotion; returns when the blocks are in GPU memory (modelled seconds)."""
        st = self.stats
        not_before = now
        cpu = self.cpu
        cpu.pin(hit.cpu_keys)
        if hit.disk_keys:
            assert self.disk_read is not None
            nbytes = len(hit.disk_keys) * self.chunk_bytes
            start, end = self.disk_read.submit(now, len(hit.disk_keys), nbytes)
            st.read_bytes[FS] += nbytes
            st.read_time_s[FS] += end - start
            for key in hit.disk_keys:  # staged through host memory
                stored, evicted = cpu.insert(key, end)
                if stored:
                    st.write_bytes[PRIMARY] += self.chunk_bytes
                else:
                    st.promotion_allocation_failures += 1
                self._cascade(evicted, now)
            cpu.pin(hit.disk_keys)
            not_before = end
        nbytes = hit.n_blocks * self.block_bytes
        start, end = self.h2d.submit(now, nbytes, not_before)
        st.load_bytes += nbytes
        st.load_time_s += end - start
        st.read_bytes[PRIMARY] += nbytes
        st.read_time_s[PRIMARY] += end - start
        loading = self._loading
        for key in (*hit.cpu_keys, *hit.disk_keys):
            loading[key] = loading.get(key, 0) + 1
        hit.ready_at = end
        return end

    def finish_load(self, hit: ExternalHit) -> None:
        """The promotion ended (or its request went away): unpin."""
        keys = (*hit.cpu_keys, *hit.disk_keys)
        self.cpu.unpin(keys)
        loading = self._loading
        for key in keys:
            n = loading.get(key, 0) - 1
            if n <= 0:
                loading.pop(key, None)
            else:
                loading[key] = n

    # ---------------------------------------------------------------- stores and cascades

    def store_chunks(self, keys: list[int], now: float) -> float | None:
        """Write-through store of newly computed chunks; returns when the copy ends (None if nothing copied)."""
        cpu = self.cpu
        new = [key for key in keys if key not in cpu]
        for key in keys:
            if key in cpu:
                cpu.touch(key)
        if not new:
            return None
        stored: list[int] = []
        inf = float("inf")
        for key in new:
            ok, evicted = cpu.insert(key, inf)
            if ok:
                stored.append(key)
            else:
                self.stats.allocation_failures += 1
            self._cascade(evicted, now)
        if not stored:
            return None
        end = self._d2h(len(stored), now)
        for key in stored:
            cpu.insert_ready(key, end)
        return end

    def store_evicted(self, key: int) -> None:
        """Offload-on-eviction: the GPU evicts a block; copy it to the CPU tier (the step waits for it)."""
        cpu = self.cpu
        if key in cpu:
            cpu.touch(key)
            return
        ok, evicted = cpu.insert(key, float("inf"))
        self._cascade(evicted, self.now)
        if not ok:
            self.stats.allocation_failures += 1
            return
        end = self._d2h(1, self.now)
        cpu.insert_ready(key, end)
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

    def _cascade(self, evicted: list[int], now: float) -> None:
        fs = self.fs
        if fs is None or not evicted:
            return
        assert self.disk_write is not None
        if self.disk_write.free_at - now > MAX_WRITE_BACKLOG_S:  # write queue full: the store is dropped
            new = sum(1 for key in evicted if key not in fs.index)
            if new:
                self.stats.stores_dropped[FS] += 1
                self.stats.blocks_dropped[FS] += new * self.k
            return
        written = 0
        for key in evicted:
            if key in fs.index:
                fs.index.move_to_end(key)
                continue
            ok, _dropped = fs.write(key)
            if ok:
                written += 1
            else:
                self.stats.cascade_failures += 1
        if written:
            assert self.disk_write is not None
            nbytes = written * self.chunk_bytes
            start, end = self.disk_write.submit(now, written, nbytes)
            self.stats.write_bytes[FS] += nbytes
            self.stats.write_time_s[FS] += end - start

    # ---------------------------------------------------------------- admin

    def cache_loss(self) -> int:
        """Delete the fs tier's files (real cache loss); returns how many were deleted."""
        return self.fs.delete_own_files() if self.fs is not None else 0

    def active_promotions(self, now: float) -> int:
        return self.disk_read.active_jobs(now) if self.disk_read is not None else 0

    def active_cascades(self, now: float) -> int:
        return self.disk_write.active_jobs(now) if self.disk_write is not None else 0
