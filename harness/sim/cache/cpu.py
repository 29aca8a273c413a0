"""The CPU (host DRAM) tier: chunks of KV in pinned host memory, replaced by LRU or ARC.

Keys are chunk hashes (the hash of a chunk's last GPU block). An entry becomes readable at ``ready_at`` (when
the device-to-host copy that filled it ends); lookups at earlier times miss, as vLLM only loads completed
stores. Entries being loaded to the GPU are pinned and never evicted. Capacity is in chunks:
``cpu_bytes_to_use // chunk_bytes``.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness.sim.cache.policy import make_policy


class CpuTier:
    """Host-memory KV tier."""

    def __init__(self, capacity_chunks: int, policy: str = "lru") -> None:
        self.capacity = capacity_chunks
        self._ready_at: dict[int, float] = {}
        self._pins: dict[int, int] = {}
        self.policy = make_policy(policy, capacity_chunks, self._is_pinned)
        self.evictions = 0

    def _is_pinned(self, key: int) -> bool:
        return key in self._pins

    def __len__(self) -> int:
        return len(self._ready_at)

    def __contains__(self, key: int) -> bool:
        return key in self._ready_at

    @property
    def usage(self) -> float:
        return len(self._ready_at) / self.capacity if self.capacity else 0.0

    def pinned_share(self, now: float) -> float:
        """Share of capacity held by in-flight transfers (being loaded to the GPU, or still being written): what
        vLLM's ``kv_offload_cpu_cache_usage_perc`` reports; a full, idle tier reads 0."""
        if not self.capacity:
            return 0.0
        ready_at, pins = self._ready_at, self._pins
        busy = sum(1 for k in pins if k in ready_at) + sum(1 for k, t in ready_at.items() if t > now and k not in pins)
        return busy / self.capacity

    def is_ready(self, key: int, now: float) -> bool:
        t = self._ready_at.get(key)
        return t is not None and t <= now

    def touch(self, key: int) -> None:
        if key in self._ready_at:
            self.policy.touch(key)

    def insert(self, key: int, ready_at: float) -> tuple[bool, list[int]]:
        """Store a chunk; returns (stored, evicted keys). An existing entry is only touched."""
        if key in self._ready_at:
            self.policy.touch(key)
            return True, []
        inserted, evicted = self.policy.insert(key)
        for k in evicted:
            del self._ready_at[k]
        self.evictions += len(evicted)
        if inserted:
            self._ready_at[key] = ready_at
        return inserted, evicted

    def insert_ready(self, key: int, ready_at: float) -> None:
        """Set when a resident entry becomes readable (its copy ends)."""
        if key in self._ready_at:
            self._ready_at[key] = ready_at

    def pin(self, keys: Iterable[int]) -> None:
        pins = self._pins
        for k in keys:
            pins[k] = pins.get(k, 0) + 1

    def unpin(self, keys: Iterable[int]) -> None:
        pins = self._pins
        for k in keys:
            n = pins.get(k, 0) - 1
            if n <= 0:
                pins.pop(k, None)
            else:
                pins[k] = n

    def clear(self) -> None:
        for k in list(self._ready_at):
            if k not in self._pins:
                self.policy.remove(k)
                del self._ready_at[k]
