"""Replacement policies of the CPU tier: LRU and ARC (as vLLM's ``eviction_policy`` lru|arc).

Both keep a fixed capacity of keys (chunk hashes). ``insert`` adds a key and returns ``(inserted, evicted)``:
whether the key is now resident, and the keys evicted to make room (``inserted`` is false when every resident
key is pinned, i.e. being loaded, so nothing could be evicted); ``touch`` records a hit. Pinned keys are never evicted.

ARC follows Megiddo & Modha, "ARC: A Self-Tuning, Low Overhead Replacement Cache" (FAST 2003): resident lists
T1 (seen once recently) and T2 (seen at least twice), ghost lists B1/B2 of recently evicted keys, and a target
size ``p`` for T1 that adapts on ghost hits. The only change is that eviction skips pinned keys.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol


class EvictionPolicy(Protocol):
    """What the CPU tier needs from a replacement policy."""

    capacity: int

    def __contains__(self, key: int) -> bool: ...

    def __len__(self) -> int: ...

    def touch(self, key: int) -> None: ...

    def insert(self, key: int) -> tuple[bool, list[int]]: ...

    def remove(self, key: int) -> None: ...


def _pop_lru_unpinned(od: OrderedDict[int, None], pinned: Callable[[int], bool]) -> int | None:
    for key in od:
        if not pinned(key):
            del od[key]
            return key
    return None


class LruPolicy:
    """Least recently used."""

    def __init__(self, capacity: int, pinned: Callable[[int], bool]) -> None:
        self.capacity = capacity
        self._pinned = pinned
        self._od: OrderedDict[int, None] = OrderedDict()

    def __contains__(self, key: int) -> bool:
        return key in self._od

    def __len__(self) -> int:
        return len(self._od)

    def touch(self, key: int) -> None:
        if key in self._od:
            self._od.move_to_end(key)

    def insert(self, key: int) -> tuple[bool, list[int]]:
        if key in self._od:
            self._od.move_to_end(key)
            return True, []
        if self.capacity <= 0:
            return False, []
        evicted: list[int] = []
        while len(self._od) >= self.capacity:
            victim = _pop_lru_unpinned(self._od, self._pinned)
            if victim is None:
                return False, evicted
            evicted.append(victim)
        self._od[key] = None
        return True, evicted

    def remove(self, key: int) -> None:
        self._od.pop(key, None)


class ArcPolicy:
    """Adaptive replacement cache."""

    def __init__(self, capacity: int, pinned: Callable[[int], bool]) -> None:
        self.capacity = capacity
        self._pinned = pinned
        self.p = 0.0
        self.t1: OrderedDict[int, None] = OrderedDict()
        self.t2: OrderedDict[int, None] = OrderedDict()
        self.b1: OrderedDict[int, None] = OrderedDict()
        self.b2: OrderedDict[int, None] = OrderedDict()

    def __contains__(self, key: int) -> bool:
        return key in self.t1 or key in self.t2

    def __len__(self) -> int:
        return len(self.t1) + len(self.t2)

    def touch(self, key: int) -> None:
        if key in self.t1:
            del self.t1[key]
            self.t2[key] = None
        elif key in self.t2:
            self.t2.move_to_end(key)

    def _replace(self, key_in_b2: bool) -> int | None:
        """Evict from T1 or T2 per ARC's REPLACE rule; the victim moves to its ghost list."""
        n1 = len(self.t1)
        prefer_t1 = n1 > 0 and (n1 > self.p or (key_in_b2 and n1 == int(self.p)))
        order = ((self.t1, self.b1), (self.t2, self.b2)) if prefer_t1 else ((self.t2, self.b2), (self.t1, self.b1))
        for resident, ghost in order:
            victim = _pop_lru_unpinned(resident, self._pinned)
            if victim is not None:
                ghost[victim] = None
                return victim
        return None

    def _trim_ghosts(self) -> None:
        c = self.capacity
        while len(self.t1) + len(self.b1) > c and self.b1:
            self.b1.popitem(last=False)
        while len(self.t1) + len(self.t2) + len(self.b1) + len(self.b2) > 2 * c and self.b2:
            self.b2.popitem(last=False)
        while len(self.t1) + len(self.t2) + len(self.b1) + len(self.b2) > 2 * c and self.b1:
            self.b1.popitem(last=False)

    def insert(self, key: int) -> tuple[bool, list[int]]:
        c = self.capacity
        if key in self:
            self.touch(key)
            return True, []
        if c <= 0:
            return False, []
        evicted: list[int] = []
        if key in self.b1 or key in self.b2:
            in_b2 = key in self.b2
            if in_b2:
                self.p = max(0.0, self.p - max(len(self.b1) / max(len(self.b2), 1), 1.0))
            else:
                self.p = min(float(c), self.p + max(len(self.b2) / max(len(self.b1), 1), 1.0))
            while len(self) >= c:
                victim = self._replace(in_b2)
                if victim is None:
                    return False, evicted
                evicted.append(victim)
            (self.b2 if in_b2 else self.b1).pop(key)
            self.t2[key] = None
            self._trim_ghosts()
            return True, evicted
        # A key seen for the first time (or forgotten).
        if len(self.t1) + len(self.b1) >= c:
            if len(self.t1) < c:
                self.b1.popitem(last=False)
            else:
                victim = _pop_lru_unpinned(self.t1, self._pinned)
                if victim is not None:
                    evicted.append(victim)
        elif len(self.t1) + len(self.t2) + len(self.b1) + len(self.b2) >= 2 * c and self.b2:
            self.b2.popitem(last=False)
        while len(self) >= c:
            victim = self._replace(False)
            if victim is None:
                return False, evicted
            evicted.append(victim)
        self.t1[key] = None
        self._trim_ghosts()
        return True, evicted

    def remove(self, key: int) -> None:
        for od in (self.t1, self.t2, self.b1, self.b2):
            od.pop(key, None)


def make_policy(name: str, capacity: int, pinned: Callable[[int], bool]) -> LruPolicy | ArcPolicy:
    """``lru`` or ``arc``."""
    if name == "lru":
        return LruPolicy(capacity, pinned)
    if name == "arc":
        return ArcPolicy(capacity, pinned)
    raise ValueError(f"unknown eviction_policy {name!r} (expected 'lru' or 'arc')")
