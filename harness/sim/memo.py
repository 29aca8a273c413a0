"""A bounded memo for pure functions on the engine's hot paths (token ids of texts, block hashes).

A plain dict with a cost budget: when the costs added since the last reset pass ``limit`` it starts afresh
(cheaper than LRU bookkeeping; a shared prefix that is still in use is recomputed once and cached again).
Values must be what the memoised function returns for the key, so a hit and a miss give the same result.
"""

from __future__ import annotations

from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class BoundedMemo(Generic[K, V]):
    """``data`` is read directly on hot paths; additions go through :meth:`added`."""

    __slots__ = ("cost", "data", "limit")

    def __init__(self, limit: int) -> None:
        self.data: dict[K, V] = {}
        self.cost = 0
        self.limit = limit

    def added(self, cost: int) -> None:
        """Entries worth ``cost`` were put in ``data``; start afresh once past the budget."""
        self.cost += cost
        if self.cost > self.limit:
            self.data.clear()
            self.cost = 0
