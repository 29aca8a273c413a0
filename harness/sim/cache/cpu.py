"""The CPU (host DRAM) tier: vLLM 0.32's ``CPUOffloadingManager`` with modelled times.

Keys are chunk hashes (the hash of a chunk's last GPU block); capacity is in chunks (``cpu_bytes_to_use //
chunk_bytes``). A resident chunk is in one of vLLM's ``ref_cnt`` states, here read off times and counts:

- being written (``ref_cnt == -1``): from ``prepare_store`` until its device-to-host copy ends (``ready_at``).
  A lookup answers ``PENDING`` (vLLM's ``HIT_PENDING``: the request waits) and the chunk cannot be evicted;
- ready (``ref_cnt == 0``): loadable and evictable;
- in use (``ref_cnt > 0``): pinned by a load to the GPU (``pin``/``unpin``) or held by a cascade to the fs tier
  until its disk write ends (``hold``): loadable, not evictable.

``prepare_store(keys)`` is vLLM's, step for step: with ``store_threshold >= 2`` every offer is counted (an LRU
tracker of ``max_tracker_size`` keys) and only keys offered that often are stored; ghost hits adapt ARC once per
request; the room the new keys need is evicted atomically, never from the keys offered (``protected``); if not
enough chunks are evictable nothing is stored and ``None`` is returned (an allocation failure). Replacement order
is applied per request (:class:`RequestAccess`, vLLM's ``_RequestCacheAccess``): the keys a request stored or
reused are handed to the policy, in prefix order, when the request finishes (:mod:`harness.sim.cache.policy`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from harness.sim.cache.policy import make_policy

HIT = "hit"
PENDING = "pending"
MISS = "miss"
INF = float("inf")
MAX_TRACKER_SIZE = 64_000
"""vLLM's default ``max_tracker_size``: keys whose offers the ``store_threshold`` tracker counts."""


@dataclass(slots=True)
class RequestAccess:
    """The chunks one request stored or reused, for the policy at its end (vLLM's ``_RequestCacheAccess``)."""

    generation: int
    seen: dict[int, int] = field(default_factory=dict)  # key -> chunk position in the request
    inserted: set[int] = field(default_factory=set)
    reused: set[int] = field(default_factory=set)
    store_miss: set[int] = field(default_factory=set)
    finished: bool = False

    def record(self, keys: Iterable[tuple[int, int]], reused: Iterable[int] = ()) -> None:
        seen = self.seen
        for key, pos in keys:
            if key not in seen:
                seen[key] = pos
        self.reused.update(key for key in reused if key not in self.inserted)


class StoreResult(NamedTuple):
    """What a successful ``prepare_store`` did: keys now being written, keys evicted to make room."""

    stored: list[int]
    evicted: list[int]


class CpuTier:
    """Host-memory KV tier."""

    def __init__(self, capacity_chunks: int, policy: str = "lru", store_threshold: int = 0,
                 max_tracker_size: int = MAX_TRACKER_SIZE) -> None:
        self.capacity = capacity_chunks
        self.policy = make_policy(policy, capacity_chunks)
        self._ready_at: dict[int, float] = {}
        self._pins: dict[int, int] = {}
        self._held: dict[int, float] = {}
        self.now = 0.0
        self.evictions = 0
        self.store_threshold = store_threshold
        self.max_tracker_size = max_tracker_size
        self.counts: OrderedDict[int, int] | None = OrderedDict() if store_threshold >= 2 else None
        self.stores_skipped = 0
        self.generation = 0

    def __len__(self) -> int:
        return len(self._ready_at)

    def __contains__(self, key: int) -> bool:
        return key in self._ready_at

    @property
    def usage(self) -> float:
        return len(self._ready_at) / self.capacity if self.capacity else 0.0

    def _evictable(self, key: int) -> bool:
        now = self.now
        if self._ready_at[key] > now or key in self._pins:
            return False
        held = self._held.get(key)
        if held is not None:
            if held > now:
                return False
            del self._held[key]
        return True

    def pinned_share(self, now: float) -> float:
        """Share of capacity not evictable (being written, loaded or cascaded): vLLM's
        ``kv_offload_cpu_cache_usage_perc``; a full, idle tier reads 0."""
        if not self.capacity:
            return 0.0
        self.now = now
        # == sum(not self._evictable(key) for key in self._ready_at), expired holds dropped alike, without a call
        # per resident chunk (this runs on every scrape)
        ready_at, pins, held = self._ready_at, self._pins, self._held
        busy = sum(1 for t in ready_at.values() if t > now)
        busy += sum(1 for key in pins if ready_at.get(key, INF) <= now)
        expired: list[int] = []
        for key, until in held.items():
            if ready_at.get(key, INF) > now or key in pins:
                continue
            if until > now:
                busy += 1
            else:
                expired.append(key)
        for key in expired:
            del held[key]
        return busy / self.capacity

    def lookup(self, key: int, now: float) -> str:
        """``HIT`` (ready), ``PENDING`` (its store has not ended) or ``MISS``."""
        t = self._ready_at.get(key)
        if t is None:
            return MISS
        return HIT if t <= now else PENDING

    def is_ready(self, key: int, now: float) -> bool:
        t = self._ready_at.get(key)
        return t is not None and t <= now

    def new_access(self) -> RequestAccess:
        return RequestAccess(self.generation)

    def _current(self, access: RequestAccess) -> RequestAccess:
        if access.generation != self.generation:  # the tier was reset since: start afresh, as vLLM
            access.generation = self.generation
            access.seen.clear()
            access.inserted.clear()
            access.reused.clear()
            access.store_miss.clear()
            access.finished = False
        return access

    def _count_offers(self, keys: Sequence[int]) -> None:
        """vLLM's ``_record_accesses``: count an offer without evicting the tracked keys it names."""
        counts = self.counts
        assert counts is not None
        protected: set[int] = set()
        for key in keys:
            if key in counts:
                counts.move_to_end(key)
                counts[key] += 1
                protected.add(key)
        unprotected = len(counts) - len(protected)
        for key in keys:
            if key in counts:
                continue
            if len(counts) >= self.max_tracker_size:
                if unprotected == 0:
                    continue
                counts.popitem(last=False)
                unprotected -= 1
            counts[key] = 1

    def prepare_store(self, keys: Sequence[int], positions: Sequence[int], now: float,
                      access: RequestAccess) -> StoreResult | None:
        """Offer ``keys`` (chunk ``positions`` in the request) for storing; ``None`` is an allocation failure."""
        self.now = now
        access = self._current(access)
        if self.counts is not None:
            self._count_offers(keys)
        ready_at = self._ready_at
        to_store: list[int] = []
        ready_existing: list[int] = []
        for key in keys:
            t = ready_at.get(key)
            if t is None:
                to_store.append(key)
            elif t <= now:
                ready_existing.append(key)
        if self.counts is not None:
            counts, threshold = self.counts, self.store_threshold
            offered = len(to_store)
            to_store = [key for key in to_store if counts.get(key, 0) >= threshold]
            self.stores_skipped += offered - len(to_store)
        misses = [key for key in to_store if key not in access.store_miss]
        if misses:
            self.policy.on_store_miss(misses)
            access.store_miss.update(misses)
        recorded = {*to_store, *ready_existing}
        access.record(((k, p) for k, p in zip(keys, positions, strict=True) if k in recorded), ready_existing)
        if not to_store:
            return StoreResult([], [])
        need = len(to_store) - (self.capacity - len(ready_at))
        evicted: list[int] = []
        if need > 0:
            if need > len(ready_at) - len(self._pins):  # cannot be met (vLLM: more than the evictable chunks)
                return None
            victims = self.policy.evict(need, set(keys), self._evictable)
            if victims is None:
                return None
            for key in victims:
                del ready_at[key]
                self._held.pop(key, None)
            self.evictions += len(victims)
            evicted = victims
        for key in to_store:
            self.policy.insert(key)
            ready_at[key] = INF
        access.inserted.update(to_store)
        return StoreResult(to_store, evicted)

    def set_ready(self, keys: Iterable[int], at: float) -> None:
        """The stores of ``keys`` end at ``at`` (their copy's end): loadable from then on."""
        ready_at = self._ready_at
        for key in keys:
            if key in ready_at:
                ready_at[key] = at

    def pin(self, keys: Iterable[int], access: RequestAccess | None = None,
            positions: Sequence[int] | None = None) -> None:
        """A load to the GPU starts (vLLM's ``prepare_load``); with ``access`` the request reused the keys."""
        keys = list(keys)
        pins = self._pins
        for k in keys:
            pins[k] = pins.get(k, 0) + 1
        if access is not None:
            assert positions is not None
            self._current(access).record(zip(keys, positions, strict=True), keys)

    def unpin(self, keys: Iterable[int]) -> None:
        pins = self._pins
        for k in keys:
            n = pins.get(k, 0) - 1
            if n <= 0:
                pins.pop(k, None)
            else:
                pins[k] = n

    def hold(self, keys: Iterable[int], until: float) -> None:
        """A cascade reads ``keys`` until ``until``: not evictable before (vLLM's ``prepare_read``)."""
        held = self._held
        for k in keys:
            if held.get(k, -INF) < until:
                held[k] = until

    def finish_request(self, access: RequestAccess) -> None:
        """The request ended: its accesses reach the policy, in prefix order (vLLM's ``on_request_finished``)."""
        if access.generation != self.generation or access.finished:
            return
        access.finished = True
        order = sorted(access.seen, key=access.seen.__getitem__)
        self.policy.on_request_finished(order, access.inserted - access.reused, access.reused)

    def reset(self) -> None:
        """Drop every chunk, pinned or not (vLLM 0.32's ``CPUOffloadingManager.reset_cache``): a new generation, so
        each request's recorded accesses start afresh."""
        self.policy.clear()
        self._ready_at.clear()
        self._pins.clear()
        self._held.clear()
        self.generation += 1

    # ------------------------------------------------------------------ single-key helpers (tests, tools)

    def insert(self, key: int, ready_at: float) -> tuple[bool, list[int]]:
        """Store one key outside any request (readable from ``ready_at``); returns (stored, evicted)."""
        if key in self._ready_at:
            return True, []
        out = self.prepare_store([key], [0], self.now, self.new_access())
        if out is None:
            return False, []
        self.set_ready(out.stored, ready_at)
        return True, out.evicted

    def insert_ready(self, key: int, ready_at: float) -> None:
        """Set when a resident entry becomes readable."""
        self.set_ready([key], ready_at)
