"""Reference LRU prefix-cache simulator, one capacity at a time (slow; tests check the one-pass curve with it).

Semantics: requests in the order given (callers sort by timestamp, ties in file order).  A request's hit blocks
are the longest leading run of its blocks present in the cache when it arrives.  Then every block of the request
is touched in request order: moved to the most recently used end if present, else inserted there, and the least
recently used block is evicted while the cache holds more than ``capacity`` blocks.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


def simulate_prefix_hits(requests: Sequence[Sequence[int]], capacity: int) -> list[int]:
    """Hit blocks (leading cached run) of every request with an LRU cache of ``capacity`` blocks."""
    cache: OrderedDict[int, None] = OrderedDict()
    hits: list[int] = []
    for blocks in requests:  # bounded: one pass over the requests
        run = 0
        for block in blocks:  # bounded: the request's blocks
            if block not in cache:
                break
            run += 1
        hits.append(run)
        for block in blocks:  # bounded: the request's blocks
            if block in cache:
                cache.move_to_end(block)
            else:
                cache[block] = None
                if len(cache) > capacity:
                    cache.popitem(last=False)
    return hits


def simulate_hit_ratio(requests: Sequence[Sequence[int]], capacity: int) -> float:
    """Share of all blocks that are prefix hits at ``capacity`` blocks (0.0 for a trace without blocks)."""
    total = sum(len(blocks) for blocks in requests)
    return sum(simulate_prefix_hits(requests, capacity)) / total if total else 0.0
