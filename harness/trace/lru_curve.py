"""One-pass LRU stack distances and the exact LRU prefix-cache hit curve.

Model (the same as :mod:`harness.trace.bruteforce`): requests are processed in timestamp order (ties keep file
order).  At capacity ``C`` blocks, a request's hits are the longest leading run of its blocks that are in the cache
when it arrives; then all its blocks are touched in request order (each becomes most recently used, misses are
inserted, the least recently used block is evicted whenever the cache holds more than ``C``).

Why one pass is exact.  The cache is a plain LRU over the flat block-access sequence, so by the LRU inclusion
property it always holds the ``C`` most recently used distinct blocks, for every ``C`` at once.  Let ``d_i`` be the
LRU stack distance of the request's ``i``-th access (1 + distinct blocks touched since that block's previous
access, counting the request's own earlier accesses; cold = infinite).  Block ``i`` is in the cache at arrival iff
its depth ``a_i`` in the stack at arrival is ``<= C``.  The leading run at capacity ``C`` is the set of ``i`` with
``m_i = max(d_0..d_i) <= C``, because ``max(d_0..d_i) = max(a_0..a_i)``:

- ``max(d) >= max(a)``: for the first occurrence of a block in the request, ``d_i >= a_i`` (the ``a_i - 1``
  blocks above it at arrival were all touched since its previous access); a repeat has the ``a`` of its first
  occurrence, so it does not raise ``max(a)``;
- ``max(d) <= max(a)``: for a first occurrence, ``d_i`` is ``a_i`` plus the ``k`` distinct earlier blocks of this
  request that sat deeper than it at arrival (or were new): their depths are distinct and above ``a_i``, so one is
  at least ``a_i + k``.  A repeat has ``d_i`` at most the number of distinct blocks before it in the request,
  which is at most the largest of their depths.

So the hits at capacity ``C`` are ``#{accesses: m <= C}``: one histogram of ``m`` gives the whole curve.

Stack distances in ``O(N log N)`` numpy: with ``next[s]`` the position of the next access to the block accessed at
``s`` (infinite for its last access) and ``D(t)`` the number of distinct blocks among the first ``t + 1`` accesses,
an access ``t`` whose previous access is ``p`` has ``d = D(t) - #{s < p : next[s] > next[p]}``, a per-element
"greater elements before" count.  That count runs as an MSB-first radix pass (one stable partition per bit)
on runs of positions whose ``next`` values are consecutive — a run behaves as one element of that weight, and
shared prefixes make such runs long.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from harness.trace.blocks import BlockTrace

I64 = NDArray[np.int64]


def weighted_greater_before(values: I64, weights: I64) -> I64:
    """For a permutation ``values`` of ``0..n-1``: ``out[i] = sum(weights[j] for j < i if values[j] > values[i])``.

    MSB-first radix.  Before bit ``k`` is handled the elements are ordered by ``(values >> (k + 1), index)``; as
    ``values`` is a permutation, the groups of equal high bits are the aligned slices of ``2 ** (k + 1)``
    positions (the last one may be short) and every full group holds exactly ``2 ** k`` elements with bit ``k``
    clear.  A pair is counted at its highest differing bit, where the earlier element has the 1; then a stable
    0/1 partition inside every group gives the order for the next bit.  ``values`` and ``weights`` travel packed
    in one int64 (weights must be >= 0, their sum and ``n`` below 2**31).
    """
    n = int(values.shape[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if n >= 2**31 or int(weights.sum()) >= 2**31 or int(weights.min()) < 0:
        raise ValueError("weighted_greater_before needs n and sum(weights) below 2**31, weights >= 0")
    bits = max(1, (n - 1).bit_length())
    i32 = np.int32
    packed = (weights.astype(np.int64) << 32) | values.astype(np.int64)
    acc = np.zeros(n, dtype=i32)
    index = np.arange(n, dtype=i32)
    bit, wbit, ones, wones, pos, tmp = (np.empty(n, dtype=i32) for _ in range(6))
    t64 = np.empty(n, dtype=np.int64)
    moved_packed = np.empty(n, dtype=np.int64)
    moved_acc = np.empty(n, dtype=i32)
    for k in range(bits - 1, -1, -1):  # bounded: one level per bit of n
        size, half = 1 << (k + 1), 1 << k
        n_full = n // size
        full = n_full * size
        np.right_shift(packed, k, out=t64)
        np.bitwise_and(t64, 1, out=bit, casting="unsafe")
        np.right_shift(packed, 32, out=t64)
        np.multiply(t64, bit, out=wbit, casting="unsafe")
        # ones (and their weight) before each element, counted from its group start
        for counts, b in ((ones, bit), (wones, wbit)):
            np.cumsum(b, out=counts)
            np.subtract(counts, b, out=counts)
            if full:
                grid = counts[:full].reshape(n_full, size)
                grid -= grid[:, :1].copy()
            if full < n:
                counts[full:] -= counts[full]
        # a zero gains the weight of the ones before it in its group
        acc += wones
        np.multiply(wones, bit, out=wones)
        acc -= wones
        # zeros move to i - ones_before, ones to group_start + zeros_in_group + ones_before
        np.subtract(index, ones, out=pos)
        np.bitwise_and(index, -size, out=tmp)
        tmp += half
        if full < n:
            tmp[full:] = full + min(half, n - full)
        tmp += ones
        tmp -= pos
        tmp *= bit
        pos += tmp
        moved_packed[pos] = packed
        packed, moved_packed = moved_packed, packed
        moved_acc[pos] = acc
        acc, moved_acc = moved_acc, acc
    # the final order is by value, so acc[v] belongs to the element whose value is v
    out: I64 = acc[values].astype(np.int64)
    return out


@dataclass(frozen=True)
class StackDistances:
    """Per-access results, in processing order.

    ``prev``: flat index of the previous access to the same block (-1 if none); ``distance``: LRU stack distance
    (1-based; ``cold`` for a first access); ``prefix_depth``: the capacity this access needs to be a prefix hit,
    ``max`` of the distances of the request's accesses up to it (``cold`` if any of them is a first access).
    """

    prev: I64
    distance: I64
    prefix_depth: I64
    cold: int


_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd, so multiplying by it is a bijection on 64-bit ids


def previous_access(block_ids: I64, *, key_bits: int | None = None) -> I64:
    """Flat index of the previous access to the same block id, -1 for the first access.

    One ``np.sort`` of ``(id key << index bits) | index``.  When the ids span fewer than ``key_bits`` bits (63
    minus the index bits; Mooncake ids do) the key is the id itself.  Wider ids (64-bit hashes) use the top bits of
    a bijective mix as the key and re-sort exactly the few key groups where different ids collide.  ``key_bits``
    is only for tests.
    """
    n = int(block_ids.shape[0])
    prev = np.full(n, -1, dtype=np.int64)
    if n < 2:
        return prev
    idx_bits = (n - 1).bit_length()
    free_bits = 63 - idx_bits if key_bits is None else min(key_bits, 63 - idx_bits)
    index = np.arange(n, dtype=np.int64)
    lo = int(block_ids.min())
    exact = int(block_ids.max()) - lo < 2**free_bits
    if exact:
        key = ((block_ids - lo) << idx_bits) | index
    else:
        mixed = block_ids.view(np.uint64) * _MIX
        key = ((mixed >> np.uint64(64 - free_bits)).astype(np.int64) << idx_bits) | index
    ordered = np.sort(key)
    order = ordered & ((1 << idx_bits) - 1)
    same = (ordered[1:] >> idx_bits) == (ordered[:-1] >> idx_bits)
    if not exact:
        ids_sorted = block_ids[order]
        equal = ids_sorted[1:] == ids_sorted[:-1]
        clash = same & ~equal
        if bool(clash.any()):
            group = np.concatenate(([0], np.cumsum(~same)))
            in_bad = np.isin(group, group[1:][clash])
            sub = order[in_bad]
            sub = sub[np.lexsort((sub, block_ids[sub]))]
            sub_same = block_ids[sub[1:]] == block_ids[sub[:-1]]
            prev[sub[1:][sub_same]] = sub[:-1][sub_same]
            same &= ~in_bad[1:]
        same &= equal
    prev[order[1:][same]] = order[:-1][same]
    return prev


def stack_distances_from_prev(prev: I64, cold: int) -> I64:
    """LRU stack distance of every access given :func:`previous_access`; ``cold`` for first accesses."""
    n = int(prev.shape[0])
    dist = np.full(n, cold, dtype=np.int64)
    reused = np.flatnonzero(prev >= 0)
    if reused.size == 0:
        return dist
    nxt = np.full(n, -1, dtype=np.int64)
    nxt[prev[reused]] = reused
    distinct = np.cumsum(prev < 0)
    last = nxt < 0
    last_before: I64 = np.cumsum(last) - last  # last accesses (next = infinity) before each position
    fpos = np.flatnonzero(~last)
    y = nxt[fpos]
    # runs of consecutive `next` values act as one weighted element
    brk = np.ones(y.shape[0], dtype=np.bool_)
    brk[1:] = y[1:] != y[:-1] + 1
    run_start = np.flatnonzero(brk)
    run_len = np.diff(np.append(run_start, y.shape[0]))
    run_y = y[run_start]
    mark = np.zeros(n, dtype=np.bool_)
    mark[run_y] = True
    rank = np.cumsum(mark) - 1
    greater = np.repeat(weighted_greater_before(rank[run_y], run_len), run_len)
    greater_all = np.zeros(n, dtype=np.int64)
    greater_all[fpos] = greater + last_before[fpos]
    dist[reused] = distinct[reused] - greater_all[prev[reused]]
    return dist


def segment_running_max(values: I64, offsets: I64, cold: int) -> I64:
    """Running maximum of ``values`` restarted at every segment start (values in ``1..cold``)."""
    n = int(values.shape[0])
    if n == 0:
        return values.copy()
    lengths = np.diff(offsets)
    seg = np.repeat(np.arange(lengths.shape[0], dtype=np.int64), lengths)
    stride = cold + 1
    if (lengths.shape[0] + 1) * stride >= 2**62:
        raise ValueError("trace too large for the segmented maximum")
    keyed = np.maximum.accumulate(values + seg * stride)
    out: I64 = keyed - seg * stride
    return out


def stack_distances(trace: BlockTrace) -> StackDistances:
    """Stack distances and prefix-hit depths of a trace that is already in time order."""
    cold = trace.n_blocks + 1
    prev = previous_access(trace.block_ids)
    dist = stack_distances_from_prev(prev, cold)
    depth = segment_running_max(dist, trace.offsets, cold)
    return StackDistances(prev=prev, distance=dist, prefix_depth=depth, cold=cold)


@dataclass(frozen=True)
class LruCurve:
    """Exact LRU prefix-cache hits at every capacity.

    ``hit_blocks[c]`` / ``hit_tokens[c]`` are the hits at capacity ``c`` blocks for ``c = 0..max_capacity``; at
    any larger capacity they stay at the last value (the infinite-cache hits).
    """

    hit_blocks: I64
    hit_tokens: I64
    total_blocks: int
    total_tokens: int

    @property
    def max_capacity(self) -> int:
        """The smallest capacity that reaches the infinite-cache hits."""
        return int(self.hit_blocks.shape[0]) - 1

    def blocks_at(self, capacity: int) -> int:
        """Hit blocks at ``capacity`` blocks."""
        return int(self.hit_blocks[min(max(capacity, 0), self.max_capacity)])

    def tokens_at(self, capacity: int) -> int:
        """Hit prompt tokens at ``capacity`` blocks."""
        return int(self.hit_tokens[min(max(capacity, 0), self.max_capacity)])

    def block_ratio_at(self, capacity: int) -> float:
        return self.blocks_at(capacity) / self.total_blocks if self.total_blocks else 0.0

    def token_ratio_at(self, capacity: int) -> float:
        return self.tokens_at(capacity) / self.total_tokens if self.total_tokens else 0.0

    def capacity_for_share(self, share: float) -> int:
        """Smallest capacity (blocks) whose hit blocks reach ``share`` of the infinite-cache hit blocks."""
        target = share * float(self.hit_blocks[-1])
        return int(np.searchsorted(self.hit_blocks, target - 1e-9, side="left"))


def curve_from_depths(depth: I64, token_weights: I64, cold: int, total_tokens: int) -> LruCurve:
    """Histogram the prefix depths into cumulative hits per capacity."""
    hit = depth < cold
    max_cap = int(depth[hit].max()) if bool(hit.any()) else 0
    blocks = np.bincount(depth[hit], minlength=max_cap + 1)
    tokens = np.bincount(depth[hit], weights=token_weights[hit], minlength=max_cap + 1)
    return LruCurve(
        hit_blocks=np.cumsum(blocks).astype(np.int64),
        hit_tokens=np.cumsum(np.rint(tokens).astype(np.int64)),
        total_blocks=int(depth.shape[0]),
        total_tokens=total_tokens,
    )


def lru_curve(trace: BlockTrace) -> LruCurve:
    """The exact LRU prefix-cache hit curve of a trace (sorted into time order first)."""
    ordered = trace.in_time_order()
    sd = stack_distances(ordered)
    return curve_from_depths(sd.prefix_depth, ordered.block_token_weights(), sd.cold, int(ordered.input_tokens.sum()))
