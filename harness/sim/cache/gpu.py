"""The GPU's paged KV pool with prefix caching (vLLM v1's block pool, simplified).

``num_blocks`` blocks of ``block_size`` tokens. A block has a reference count (running requests using it) and,
once its tokens are computed and it is full, the hash of the prefix it ends (:mod:`harness.sim.blocks`).
Blocks with a zero reference count sit in a free queue in LRU order; a free block that still has a hash is a
*cached* block and can be hit by a later request with the same prefix (it leaves the free queue while used).
Allocation takes blocks from the head of the free queue; taking a cached block evicts it from the prefix cache
(``on_evict`` is called with its hash: the place where an offload-on-eviction tier stores it). Freed blocks
are appended in reverse order, so the tail of a sequence is evicted before its head, as in vLLM.

Usage (``kv_cache_usage_perc``) is ``1 - free / total``: cached-but-free blocks count as free, as in vLLM.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence


class GpuBlockPool:
    """Block allocator and GPU prefix cache."""

    def __init__(
        self,
        num_blocks: int,
        enable_caching: bool = True,
        on_evict: Callable[[int], None] | None = None,
    ) -> None:
        if num_blocks <= 0:
            raise ValueError("the GPU pool needs at least one block")
        self.num_blocks = num_blocks
        self.enable_caching = enable_caching
        self.on_evict = on_evict
        self._ref = [0] * num_blocks
        self._hash: list[int | None] = [None] * num_blocks
        self._cached: dict[int, int] = {}
        self._free: OrderedDict[int, None] = OrderedDict((b, None) for b in range(num_blocks))
        self.evictions = 0

    @property
    def num_free(self) -> int:
        """Blocks with no reference (including cached ones)."""
        return len(self._free)

    @property
    def num_cached(self) -> int:
        """Blocks holding a hashed (reusable) prefix, used or free."""
        return len(self._cached)

    @property
    def usage(self) -> float:
        """Fraction of blocks referenced by requests."""
        return 1.0 - len(self._free) / self.num_blocks

    def is_cached(self, block_hash: int) -> bool:
        return block_hash in self._cached

    def lookup_prefix(self, hashes: Sequence[int], max_blocks: int) -> list[int]:
        """Block ids of the longest cached prefix of ``hashes`` (at most ``max_blocks``)."""
        if not self.enable_caching:
            return []
        out: list[int] = []
        cached = self._cached
        for h in hashes[:max_blocks]:
            bid = cached.get(h)
            if bid is None:
                break
            out.append(bid)
        return out

    def count_evictable(self, bids: Sequence[int]) -> int:
        """How many of ``bids`` are free (so taking them reduces the free count)."""
        ref = self._ref
        return sum(1 for b in bids if ref[b] == 0)

    def acquire(self, bids: Sequence[int]) -> None:
        """Take a reference on cached blocks (a prefix hit)."""
        ref = self._ref
        free = self._free
        for b in bids:
            if ref[b] == 0:
                del free[b]
            ref[b] += 1

    def allocate(self, n: int) -> list[int] | None:
        """``n`` new blocks, evicting cached free blocks LRU-first; ``None`` if fewer than ``n`` are free."""
        if n > len(self._free):
            return None
        out: list[int] = []
        free = self._free
        for _ in range(n):
            bid, _none = free.popitem(last=False)
            h = self._hash[bid]
            if h is not None:
                self._hash[bid] = None
                if self._cached.get(h) == bid:
                    del self._cached[h]
                self.evictions += 1
                if self.on_evict is not None:
                    self.on_evict(h)
            self._ref[bid] = 1
            out.append(bid)
        return out

    def register(self, bid: int, block_hash: int) -> None:
        """Mark a computed full block as holding the prefix ``block_hash``."""
        if not self.enable_caching or self._hash[bid] is not None:
            return
        if block_hash in self._cached:
            return  # another block already holds this prefix; this one stays anonymous
        self._hash[bid] = block_hash
        self._cached[block_hash] = bid

    def reset_prefix_cache(self) -> bool:
        """Forget every cached prefix (vLLM 0.32's ``BlockPool.reset_prefix_cache``): refused (False, nothing
        changed) while any block is referenced, by a running request or a store in flight."""
        if len(self._free) != self.num_blocks:
            return False
        self._cached.clear()
        self._hash = [None] * self.num_blocks
        return True

    def release(self, bids: Sequence[int]) -> None:
        """Drop a reference on each block; blocks reaching zero join the free queue (tail first)."""
        ref = self._ref
        free = self._free
        for b in reversed(bids):
            ref[b] -= 1
            if ref[b] == 0:
                free[b] = None
            elif ref[b] < 0:
                raise AssertionError(f"block {b} released more often than acquired")
