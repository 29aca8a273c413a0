"""The CPU tier's LRU and ARC as vLLM 0.32 implements them (vllm/v1/kv_offload/cpu/policies), not the textbook.

Recency reaches the policy when a request finishes, in reverse prefix order; a lookup is no access; ARC inserts into
T1 even on a ghost hit (which only adapts the target), promotes to T2 only chunks a request reused, and trims each
ghost list to the capacity on its own. tests/e2e/test_e2e_sim_oracle.py holds the same code against vLLM's.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.sim.cache.cpu import HIT, MISS, PENDING, CpuTier
from harness.sim.cache.policy import ArcPolicy, LruPolicy


def _all(_key: int) -> bool:
    return True


def store(tier: CpuTier, keys: list[int], now: float = 0.0, ready_at: float = 0.0) -> list[int] | None:
    """One request storing ``keys`` (ready at ``ready_at``) and finishing; returns what it evicted."""
    access = tier.new_access()
    out = tier.prepare_store(keys, range(len(keys)), now, access)
    if out is not None:
        tier.set_ready(out.stored, ready_at)
    tier.finish_request(access)
    return None if out is None else out.evicted


def reuse(tier: CpuTier, keys: list[int]) -> None:
    """One request loading ``keys`` (a hit) and finishing."""
    access = tier.new_access()
    tier.pin(keys, access, range(len(keys)))
    tier.unpin(keys)
    tier.finish_request(access)


def test_lru_head_of_a_request_is_evicted_last() -> None:
    tier = CpuTier(4, "lru")
    store(tier, [1, 2, 3])
    assert isinstance(tier.policy, LruPolicy) and tier.policy.resident() == [3, 2, 1]  # tail first
    assert store(tier, [4, 5], now=1.0) == [3]


def test_lru_a_lookup_is_no_access_only_a_finished_request_is() -> None:
    tier = CpuTier(3, "lru")
    store(tier, [1])
    store(tier, [2])
    store(tier, [3])
    assert tier.lookup(1, 1.0) == HIT  # looked at, not used
    assert store(tier, [4], now=1.0) == [1]
    access = tier.new_access()
    tier.pin([2], access, [0])  # loaded but the request has not finished: no recency yet
    tier.unpin([2])
    assert store(tier, [5], now=1.0) == [2]
    tier.finish_request(access)  # too late: 2 is gone, nothing happens


def test_store_is_atomic_and_never_evicts_what_it_offers() -> None:
    tier = CpuTier(3, "lru")
    store(tier, [1, 2, 3])
    tier.pin([1])
    assert store(tier, [4, 5, 6], now=1.0) is None  # 3 needed, 2 evictable: nothing stored, nothing evicted
    assert len(tier) == 3 and 4 not in tier
    tier.unpin([1])
    assert isinstance(tier.policy, LruPolicy) and tier.policy.resident()[0] == 3
    assert store(tier, [3, 7], now=1.0) == [2]  # 3, least recent, is offered again: protected


def test_chunks_being_written_loaded_or_cascaded_are_not_evictable() -> None:
    tier = CpuTier(2, "lru")
    store(tier, [1], ready_at=5.0)  # its copy ends at 5
    store(tier, [2])
    assert tier.lookup(1, 4.0) == PENDING and tier.lookup(1, 5.0) == HIT
    tier.pin([2])  # a load to the GPU
    assert store(tier, [3], now=4.0) is None
    tier.unpin([2])
    tier.hold([2], until=6.0)  # a cascade to the fs tier reads it
    assert store(tier, [3], now=4.0) is None
    assert store(tier, [3], now=5.0) == [1]
    assert store(tier, [4], now=6.0) == [2] and tier.lookup(4, 6.0) == HIT and tier.lookup(9, 6.0) == MISS


def test_arc_inserts_into_t1_even_on_a_ghost_hit_and_adapts_the_target() -> None:
    tier = CpuTier(2, "arc")
    arc = tier.policy
    assert isinstance(arc, ArcPolicy)
    store(tier, [1])
    store(tier, [2])
    assert store(tier, [3], now=1.0) == [1] and list(arc.b1) == [1]
    assert store(tier, [1], now=2.0) == [2]  # ghost hit in B1: target up by max(1, |B2|/|B1|) = 1
    assert arc.target_t1 == 1.0 and 1 in arc.t1 and 1 not in arc.t2 and 1 not in arc.b1


def test_arc_promotes_to_t2_only_what_a_request_reused() -> None:
    tier = CpuTier(4, "arc")
    arc = tier.policy
    assert isinstance(arc, ArcPolicy)
    access = tier.new_access()
    out = tier.prepare_store([1, 2], [0, 1], 0.0, access)
    assert out is not None
    tier.set_ready(out.stored, 0.0)
    tier.pin([1], access, [0])  # the same request loading what it inserted: still insertion-only
    tier.finish_request(access)
    assert list(arc.t1) == [2, 1] and not arc.t2  # recency restored tail to head, no promotion
    reuse(tier, [1])
    assert list(arc.t1) == [2] and list(arc.t2) == [1]
    store(tier, [1, 3], now=1.0)  # offering a ready chunk is a reuse too
    assert list(arc.t2) == [1] and list(arc.t1) == [2, 3]


def test_arc_evicts_from_t1_while_it_holds_its_target_then_t2() -> None:
    arc = ArcPolicy(4)
    for key in (1, 2):
        arc.insert(key)
    arc.on_request_finished([1, 2], set(), {1, 2})  # reused: T2 = [2, 1]
    for key in (3, 4):
        arc.insert(key)
    arc.target_t1 = 1.5
    assert arc.evict(1, set(), _all) == [3]  # len(T1) 2 >= int(1.5)
    assert arc.evict(1, set(), _all) == [4]  # 1 >= 1
    assert arc.evict(1, set(), _all) == [2]  # T1 empty: from T2
    assert list(arc.b1) == [3, 4] and list(arc.b2) == [2]
    assert arc.evict(2, set(), _all) is None and 1 in arc  # atomic


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["store", "reuse"]), st.lists(st.integers(0, 24), min_size=1, max_size=5,
                                                                          unique=True)), max_size=120),
       st.integers(1, 6), st.sampled_from(["lru", "arc"]))
def test_policy_invariants(ops: list[tuple[str, list[int]]], capacity: int, policy: str) -> None:
    tier = CpuTier(capacity, policy)
    for i, (op, keys) in enumerate(ops):
        if op == "store":
            store(tier, keys, now=float(i), ready_at=float(i))
        else:
            reuse(tier, [k for k in keys if tier.lookup(k, float(i)) == HIT])
        assert len(tier) == len(tier.policy) <= capacity
        assert all(k in tier for k in tier.policy.resident())
        if isinstance(tier.policy, ArcPolicy):
            arc = tier.policy
            lists = [set(arc.t1), set(arc.t2), set(arc.b1), set(arc.b2)]
            assert sum(map(len, lists)) == len(set().union(*lists))  # disjoint
            assert len(arc.b1) <= capacity and len(arc.b2) <= capacity and 0 <= arc.target_t1 <= capacity
