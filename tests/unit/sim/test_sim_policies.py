"""LRU and ARC replacement, pinning, and the GPU block pool."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.sim.cache.cpu import CpuTier
from harness.sim.cache.gpu import GpuBlockPool
from harness.sim.cache.policy import ArcPolicy, LruPolicy


def _never(_key: int) -> bool:
    return False


def test_lru_evicts_least_recently_used() -> None:
    p = LruPolicy(3, _never)
    for k in (1, 2, 3):
        assert p.insert(k) == (True, [])
    p.touch(1)
    assert p.insert(4) == (True, [2])
    assert 1 in p and 2 not in p and len(p) == 3


def test_lru_skips_pinned_and_fails_when_all_pinned() -> None:
    pinned = {1, 2}
    p = LruPolicy(2, pinned.__contains__)
    p.insert(1)
    p.insert(2)
    assert p.insert(3) == (False, [])
    pinned.discard(1)
    assert p.insert(3) == (True, [1])


def test_arc_resists_scans() -> None:
    lru, arc = LruPolicy(10, _never), ArcPolicy(10, _never)
    hot = list(range(5))
    for policy in (lru, arc):
        for _ in range(3):
            for k in hot:
                policy.insert(k)
                policy.touch(k)
        for k in range(100, 130):  # a one-off scan larger than the cache
            policy.insert(k)
    assert sum(k in arc for k in hot) == len(hot)
    assert sum(k in lru for k in hot) == 0


def test_arc_ghost_hit_adapts_target() -> None:
    arc = ArcPolicy(4, _never)
    for k in (0, 1):
        arc.insert(k)
        arc.touch(k)  # seen twice: T2
    for k in (2, 3, 4):
        arc.insert(k)
    assert 2 in arc.b1 and 2 not in arc
    arc.insert(2)  # ghost hit in B1: grow the recency target
    assert arc.p > 0 and 2 in arc.t2


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["insert", "touch", "remove"]), st.integers(0, 30)), max_size=300),
       st.integers(1, 8))
def test_arc_invariants(ops: list[tuple[str, int]], capacity: int) -> None:
    arc = ArcPolicy(capacity, _never)
    resident: set[int] = set()
    for op, key in ops:
        if op == "insert":
            ok, evicted = arc.insert(key)
            assert ok
            resident.difference_update(evicted)
            resident.add(key)
        elif op == "touch":
            arc.touch(key)
        else:
            arc.remove(key)
            resident.discard(key)
        lists = [set(arc.t1), set(arc.t2), set(arc.b1), set(arc.b2)]
        assert sum(len(x) for x in lists) == len(set().union(*lists))  # disjoint
        assert len(arc) <= capacity
        assert len(arc.t1) + len(arc.b1) <= capacity
        assert sum(len(x) for x in lists) <= 2 * capacity
        assert set(arc.t1) | set(arc.t2) == resident


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 20), max_size=200), st.integers(1, 6))
def test_lru_matches_reference(keys: list[int], capacity: int) -> None:
    p = LruPolicy(capacity, _never)
    ref: list[int] = []
    for k in keys:
        p.insert(k)
        if k in ref:
            ref.remove(k)
        ref.append(k)
        del ref[:-capacity]
        assert set(ref) == {x for x in range(21) if x in p}


def test_cpu_tier_ready_time_and_pins() -> None:
    tier = CpuTier(2, "lru")
    assert tier.insert(1, ready_at=5.0) == (True, [])
    assert not tier.is_ready(1, 4.0) and tier.is_ready(1, 5.0)
    tier.insert(2, 0.0)
    tier.pin([1, 2])
    assert tier.insert(3, 0.0) == (False, [])
    tier.unpin([1])
    assert tier.insert(3, 0.0) == (True, [1])
    assert tier.usage == 1.0


def test_gpu_pool_lru_eviction_and_callback() -> None:
    evicted: list[int] = []
    pool = GpuBlockPool(4, on_evict=evicted.append)
    a = pool.allocate(2)
    assert a is not None
    pool.register(a[0], 100)
    pool.register(a[1], 101)
    pool.release(a)  # freed tail first: 101 before 100 in eviction order
    assert pool.num_free == 4 and pool.usage == 0.0
    assert pool.lookup_prefix([100, 101, 102], 3) == a
    b = pool.allocate(3)
    assert b is not None and evicted == [101]
    assert pool.lookup_prefix([100, 101], 2) == [a[0]]
    assert pool.allocate(2) is None
    assert pool.count_evictable([a[0]]) == 1
    pool.acquire([a[0]])
    assert pool.num_free == 0 and pool.usage == 1.0
