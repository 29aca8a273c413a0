"""The one-pass LRU curve against brute force, and its building blocks against naive definitions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.trace.blocks import BlockTrace, from_lists
from harness.trace.bruteforce import simulate_hit_ratio, simulate_prefix_hits
from harness.trace.lru_curve import (
    lru_curve,
    previous_access,
    segment_running_max,
    stack_distances,
    weighted_greater_before,
)

FAST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def naive_stack_distances(ids: list[int]) -> list[int | None]:
    """1 + distinct blocks since the previous access (None for a first access), by definition."""
    out: list[int | None] = []
    for t, block in enumerate(ids):
        prev = max((s for s in range(t) if ids[s] == block), default=None)
        out.append(None if prev is None else 1 + len(set(ids[prev + 1 : t]) - {block}))
    return out


def brute_curve(trace: BlockTrace, capacity: int) -> tuple[int, int]:
    """(hit blocks, hit tokens) at ``capacity`` by the reference simulator on the time-ordered trace."""
    ordered = trace.in_time_order()
    reqs = [ordered.block_ids[ordered.offsets[i] : ordered.offsets[i + 1]].tolist() for i in range(ordered.n_requests)]
    hits = simulate_prefix_hits(reqs, capacity)
    weights = ordered.block_token_weights()
    tokens = sum(int(weights[ordered.offsets[i] : ordered.offsets[i] + h].sum()) for i, h in enumerate(hits))
    return sum(hits), tokens


requests_st = st.lists(
    st.tuples(
        st.integers(0, 6),  # timestamp: many ties
        st.lists(st.integers(0, 9), max_size=7),  # small alphabet: repeats inside and across requests
        st.integers(0, 40),  # extra prompt tokens beyond full blocks (may exceed the blocks)
    ),
    max_size=14,
)


@FAST
@given(requests_st, st.integers(1, 4))
def test_one_pass_curve_equals_brute_force_at_every_capacity(reqs: list[tuple[int, list[int], int]], bt: int) -> None:
    trace = from_lists(
        [float(ts) for ts, _, _ in reqs],
        [ids for _, ids, _ in reqs],
        bt,
        input_tokens=[max(0, len(ids) * bt - 3 + extra % 7) for _, ids, extra in reqs],
    )
    curve = lru_curve(trace)
    for capacity in range(curve.max_capacity + 3):
        assert (curve.blocks_at(capacity), curve.tokens_at(capacity)) == brute_curve(trace, capacity)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_random_larger_traces_equal_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 60))
    alphabet = int(rng.integers(5, 80))
    ids = [rng.integers(0, alphabet, int(rng.integers(0, 12))).tolist() for _ in range(n)]
    trace = from_lists(rng.integers(0, 30, n).astype(float).tolist(), ids, 16)
    curve = lru_curve(trace)
    for capacity in range(curve.max_capacity + 2):
        assert curve.blocks_at(capacity) == brute_curve(trace, capacity)[0]


@FAST
@given(st.lists(st.integers(-3, 12), max_size=40))
def test_stack_distances_match_definition(ids: list[int]) -> None:
    trace = from_lists([0.0], [ids], 1)
    sd = stack_distances(trace)
    expected = naive_stack_distances(ids)
    got = [None if d == sd.cold else int(d) for d in sd.distance]
    assert got == expected


@FAST
@given(st.data())
def test_weighted_greater_before_matches_naive(data: st.DataObject) -> None:
    n = data.draw(st.integers(0, 70))
    values = data.draw(st.permutations(list(range(n))))
    weights = data.draw(st.lists(st.integers(0, 9), min_size=n, max_size=n))
    got = weighted_greater_before(np.array(values, dtype=np.int64), np.array(weights, dtype=np.int64))
    expected = [sum(weights[j] for j in range(i) if values[j] > values[i]) for i in range(n)]
    assert got.tolist() == expected


def naive_prev(ids: list[int]) -> list[int]:
    last: dict[int, int] = {}
    out = []
    for i, x in enumerate(ids):
        out.append(last.get(x, -1))
        last[x] = i
    return out


@FAST
@given(
    st.lists(st.sampled_from([-(2**63), 2**63 - 1, 0, 1, 2**40, -5, 2**62 + 3]), max_size=40),
    st.sampled_from([None, 1, 2, 3]),
)
def test_previous_access_handles_wide_ids_and_key_collisions(ids: list[int], key_bits: int | None) -> None:
    got = previous_access(np.array(ids, dtype=np.int64), key_bits=key_bits)
    assert got.tolist() == naive_prev(ids)


def test_previous_access_on_random_64_bit_ids() -> None:
    rng = np.random.default_rng(3)
    pool = rng.integers(-(2**63), 2**63 - 1, 500, dtype=np.int64)
    ids = pool[rng.integers(0, 500, 5000)]
    assert previous_access(ids).tolist() == naive_prev(ids.tolist())
    assert previous_access(ids, key_bits=4).tolist() == naive_prev(ids.tolist())


def test_segment_running_max_restarts_per_request() -> None:
    values = np.array([3, 1, 5, 2, 9, 1, 4], dtype=np.int64)
    offsets = np.array([0, 3, 3, 5, 7], dtype=np.int64)
    assert segment_running_max(values, offsets, 10).tolist() == [3, 3, 5, 2, 9, 1, 4]


def test_prefix_semantics_a_cached_block_after_a_miss_is_not_a_hit() -> None:
    # A and C are cached, B is new: only A counts; the run stops at B even though C is cached
    trace = from_lists([0.0, 1.0], [[1, 3], [1, 2, 3]], 1)
    curve = lru_curve(trace)
    assert curve.blocks_at(10) == 1
    assert simulate_prefix_hits([[1, 3], [1, 2, 3]], 10) == [0, 1]


def test_repeated_block_inside_a_request() -> None:
    # [A, A]: the second A was not cached at arrival, so it is a miss (cached prefix is checked on arrival)
    trace = from_lists([0.0, 1.0], [[7, 7], [7, 7, 8]], 1)
    curve = lru_curve(trace)
    assert [curve.blocks_at(c) for c in range(4)] == [0, 2, 2, 2]
    assert [sum(simulate_prefix_hits([[7, 7], [7, 7, 8]], c)) for c in range(4)] == [0, 2, 2, 2]


def test_ties_keep_file_order() -> None:
    # same timestamp: file order decides; the second request reuses the first's block
    trace = from_lists([5.0, 5.0, 1.0], [[1], [1], [2]], 1)
    ordered = trace.in_time_order()
    assert ordered.block_ids.tolist() == [2, 1, 1]
    assert lru_curve(trace).blocks_at(1) == 1


def test_empty_requests_and_all_cold() -> None:
    trace = from_lists([0.0, 1.0, 2.0], [[], [1, 2], []], 16)
    curve = lru_curve(trace)
    assert curve.max_capacity == 0
    assert curve.blocks_at(100) == 0
    assert curve.capacity_for_share(0.9) == 0


def test_capacity_for_share_is_the_smallest_reaching_it() -> None:
    rng = np.random.default_rng(11)
    ids = [rng.integers(0, 40, 6).tolist() for _ in range(200)]
    trace = from_lists(list(range(200)), ids, 16)
    curve = lru_curve(trace)
    best = curve.blocks_at(curve.max_capacity)
    for share in (0.1, 0.5, 0.9, 1.0):
        cap = curve.capacity_for_share(share)
        assert curve.blocks_at(cap) >= share * best
        assert cap == 0 or curve.blocks_at(cap - 1) < share * best


def test_lru_simulator_is_plain_lru() -> None:
    # sanity of the reference itself on a hand-checked sequence
    reqs = [[1, 2], [3], [1], [2]]
    assert simulate_prefix_hits(reqs, 2) == [0, 0, 0, 0]  # 1 evicted by 3, then 2 evicted by 1
    assert simulate_prefix_hits(reqs, 3) == [0, 0, 1, 1]
    assert simulate_hit_ratio(reqs, 3) == pytest.approx(2 / 5)
