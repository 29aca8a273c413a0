"""The GPU block pool (the CPU tier's LRU and ARC, as vLLM 0.32 implements them, are tested in
``test_sim_oracle_policies.py`` and against vLLM's own managers in ``tests/e2e/test_e2e_sim_oracle.py``)."""

from __future__ import annotations

from harness.sim.cache.gpu import GpuBlockPool


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
