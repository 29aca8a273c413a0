"""Replacement policies of the CPU tier, as vLLM 0.32 implements them (``vllm/v1/kv_offload/cpu/policies``).

Keys are chunk hashes. The CPU tier (:mod:`harness.sim.cache.cpu`) owns residency, readiness and pins; a policy
only orders the resident keys and picks victims:

- ``insert(key)``: a chunk whose store was just prepared (LRU: most recent; ARC: the MRU end of T1, and any ghost
  of the key is forgotten).
- ``on_store_miss(keys)``: a store of keys not resident (ARC: a key found in a ghost list adapts the T1 target,
  B1 up and B2 down; called once per key and request). LRU ignores it.
- ``on_request_finished(keys, insertion_only, reused)``: recency is applied when a request finishes, in reverse
  prefix order, so a request's head ends up more recent than its tail. LRU refreshes every key the request stored or
  reused; ARC moves reused keys from T1 to T2 (or to T2's MRU end) and only re-orders keys the request merely
  inserted. A lookup is no access: vLLM's scheduler never calls ``touch``.
- ``evict(n, protected, evictable)``: exactly ``n`` victims that are ``evictable`` (ready, no transfer using them)
  and not ``protected`` (the keys of the store being prepared), or ``None`` and no change.

vLLM's ARC differs from the textbook one (Megiddo & Modha, FAST 2003): inserts always go to T1 (a ghost hit adapts
the target but does not promote), a second access only counts when a request that reused the chunk finishes, the
T1/T2 choice is ``len(T1) >= int(target)`` (falling back to the other list, then T1 again), and each ghost list is
trimmed to the capacity on its own after an eviction.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Protocol

Evictable = Callable[[int], bool]


class EvictionPolicy(Protocol):
    """What the CPU tier needs from a replacement policy."""

    capacity: int

    def __contains__(self, key: int) -> bool: ...

    def __len__(self) -> int: ...

    def insert(self, key: int) -> None: ...

    def remove(self, key: int) -> None: ...

    def on_store_miss(self, keys: Sequence[int]) -> None: ...

    def on_request_finished(self, keys: Sequence[int], insertion_only: Collection[int],
                            reused: Collection[int]) -> None: ...

    def evict(self, n: int, protected: Collection[int], evictable: Evictable) -> list[int] | None: ...

    def clear(self) -> None: ...


class LruPolicy:
    """Least recently used: the order of stores and request-scoped accesses (vLLM's ``LRUCachePolicy``)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._order: OrderedDict[int, None] = OrderedDict()  # least recent first

    def __contains__(self, key: int) -> bool:
        return key in self._order

    def __len__(self) -> int:
        return len(self._order)

    def resident(self) -> list[int]:
        """Resident keys, least recent first."""
        return list(self._order)

    def insert(self, key: int) -> None:
        self._order[key] = None
        self._order.move_to_end(key)

    def remove(self, key: int) -> None:
        self._order.pop(key, None)

    def on_store_miss(self, keys: Sequence[int]) -> None:
        return  # vLLM's default delegates to touch(), which ignores keys that are not resident

    def on_request_finished(self, keys: Sequence[int], insertion_only: Collection[int],
                            reused: Collection[int]) -> None:
        order = self._order
        for key in reversed(keys):
            if key in order:
                order.move_to_end(key)

    def evict(self, n: int, protected: Collection[int], evictable: Evictable) -> list[int] | None:
        if n <= 0:
            return []
        victims: list[int] = []
        for key in self._order:
            if key not in protected and evictable(key):
                victims.append(key)
                if len(victims) == n:
                    break
        if len(victims) < n:
            return None
        for key in victims:
            del self._order[key]
        return victims

    def clear(self) -> None:
        self._order.clear()


class ArcPolicy:
    """vLLM's ``ARCCachePolicy``: T1 (seen once), T2 (reused), ghost lists B1/B2 and an adaptive T1 target."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.target_t1 = 0.0
        self.t1: OrderedDict[int, None] = OrderedDict()
        self.t2: OrderedDict[int, None] = OrderedDict()
        self.b1: OrderedDict[int, None] = OrderedDict()
        self.b2: OrderedDict[int, None] = OrderedDict()

    def __contains__(self, key: int) -> bool:
        return key in self.t1 or key in self.t2

    def __len__(self) -> int:
        return len(self.t1) + len(self.t2)

    def resident(self) -> list[int]:
        """Resident keys: T1 then T2, each least recent first."""
        return [*self.t1, *self.t2]

    def insert(self, key: int) -> None:
        self.t1[key] = None
        self.b1.pop(key, None)
        self.b2.pop(key, None)

    def remove(self, key: int) -> None:
        if key in self.t1:
            del self.t1[key]
        else:
            self.t2.pop(key, None)

    def on_store_miss(self, keys: Sequence[int]) -> None:
        for key in reversed(keys):
            if key in self.b1:
                delta = max(1.0, len(self.b2) / len(self.b1))
                self.target_t1 = min(self.target_t1 + delta, float(self.capacity))
                self.b1.move_to_end(key)
            elif key in self.b2:
                delta = max(1.0, len(self.b1) / len(self.b2))
                self.target_t1 = max(self.target_t1 - delta, 0.0)
                self.b2.move_to_end(key)

    def on_request_finished(self, keys: Sequence[int], insertion_only: Collection[int],
                            reused: Collection[int]) -> None:
        t1, t2 = self.t1, self.t2
        for key in reversed(keys):
            if key in insertion_only:  # a store is no frequency hit: keep its list, restore recency
                if key in t1:
                    t1.move_to_end(key)
                elif key in t2:
                    t2.move_to_end(key)
                continue
            if key in reused:
                if key in t1:
                    del t1[key]
                    t2[key] = None
                elif key in t2:
                    t2.move_to_end(key)

    def evict(self, n: int, protected: Collection[int], evictable: Evictable) -> list[int] | None:
        if n <= 0:
            return []

        def next_candidate(entries: Iterator[int]) -> int | None:
            for key in entries:
                if key not in protected and evictable(key):
                    return key
            return None

        t1_iter, t2_iter = iter(self.t1), iter(self.t2)  # monotonic scans, as vLLM
        virtual_t1 = len(self.t1)
        chosen: list[tuple[int, bool]] = []  # (key, from T1)
        for _ in range(n):
            found: tuple[int, bool] | None = None
            if virtual_t1 >= int(self.target_t1):
                key = next_candidate(t1_iter)
                if key is not None:
                    found = (key, True)
                    virtual_t1 -= 1
            if found is None:
                key = next_candidate(t2_iter)
                if key is not None:
                    found = (key, False)
            if found is None:
                key = next_candidate(t1_iter)
                if key is None:
                    return None
                found = (key, True)
                virtual_t1 -= 1
            chosen.append(found)
        for key, from_t1 in chosen:
            if from_t1:
                del self.t1[key]
                self.b1[key] = None
            else:
                del self.t2[key]
                self.b2[key] = None
        for ghost in (self.b1, self.b2):
            for _ in range(len(ghost) - self.capacity):
                ghost.popitem(last=False)
        return [key for key, _from_t1 in chosen]

    def clear(self) -> None:
        for od in (self.t1, self.t2, self.b1, self.b2):
            od.clear()
        self.target_t1 = 0.0


def make_policy(name: str, capacity: int) -> LruPolicy | ArcPolicy:
    """``lru`` or ``arc``."""
    if name == "lru":
        return LruPolicy(capacity)
    if name == "arc":
        return ArcPolicy(capacity)
    raise ValueError(f"unknown eviction_policy {name!r} (expected 'lru' or 'arc')")
