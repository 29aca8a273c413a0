"""Counter increases and histogram quantiles over a sequence of cumulative readings, robust to counter resets.

Prometheus ``increase()`` semantics: a reading lower than the one before means the counter restarted from zero (a
server restart inside an arm), so that interval contributes the new reading itself, never a negative or a
wrapped-around number. Histogram buckets are differenced the same way (a reset is detected on the total count) and
quantiles are interpolated inside the bucket like PromQL's ``histogram_quantile``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise


def counter_increase(values: Sequence[float]) -> float:
    """Total increase over successive cumulative readings (0 for fewer than two readings)."""
    total = 0.0
    for prev, cur in pairwise(values):
        total += cur - prev if cur >= prev else cur
    return total


@dataclass(frozen=True)
class HistogramReading:
    """One cumulative histogram reading: upper bounds (ascending, last +Inf) with cumulative counts, and the sum."""

    bounds: tuple[float, ...]
    counts: tuple[float, ...]
    total: float

    @property
    def count(self) -> float:
        """Observations so far (the +Inf bucket)."""
        return self.counts[-1] if self.counts else 0.0


@dataclass(frozen=True)
class HistogramDelta:
    """Observations that fell inside an interval: cumulative bucket counts, count and sum."""

    bounds: tuple[float, ...]
    counts: tuple[float, ...]
    count: float
    total: float

    def quantile(self, q: float) -> float | None:
        """The q-quantile (0..1) by linear interpolation inside its bucket; None without observations."""
        if self.count <= 0 or not self.bounds:
            return None
        rank = q * self.count
        lower, below = 0.0, 0.0
        for bound, cum in zip(self.bounds, self.counts, strict=True):
            if cum >= rank and cum > below:
                if math.isinf(bound):
                    # PromQL: the highest finite bound when the quantile falls in the +Inf bucket.
                    finite = [b for b in self.bounds if not math.isinf(b)]
                    return finite[-1] if finite else None
                if lower == 0.0 and bound <= 0:
                    return bound
                return lower + (bound - lower) * (rank - below) / (cum - below)
            lower, below = bound, cum
        return None

    def rank_bounds(self, rank: int) -> tuple[float | None, float | None]:
        """(lower, upper) edge of the bucket holding the ``rank``-th smallest observation (1-based); an upper edge of
        +Inf is None (unbounded)."""
        lower = 0.0
        for bound, cum in zip(self.bounds, self.counts, strict=True):
            if cum >= rank:
                return lower, None if math.isinf(bound) else bound
            lower = bound
        return lower, None

    def mean(self) -> float | None:
        """Mean observation, or None without observations."""
        return self.total / self.count if self.count > 0 else None


def histogram_increase(readings: Sequence[HistogramReading]) -> HistogramDelta | None:
    """Bucket-wise increase over successive readings (buckets are aligned on their upper bounds)."""
    if not readings:
        return None
    bounds = tuple(sorted({b for r in readings for b in r.bounds}))
    acc = dict.fromkeys(bounds, 0.0)
    total = 0.0
    for prev, cur in pairwise(readings):
        reset = cur.count < prev.count
        prev_map = dict(zip(prev.bounds, prev.counts, strict=True))
        for bound, value in zip(cur.bounds, cur.counts, strict=True):
            before = 0.0 if reset else prev_map.get(bound, 0.0)
            acc[bound] += max(value - before, 0.0)
        total += cur.total if reset else max(cur.total - prev.total, 0.0)
    counts = tuple(acc[b] for b in bounds)
    # Keep counts cumulative even if a bucket set changed between readings.
    fixed: list[float] = []
    running = 0.0
    for value in counts:
        running = max(running, value)
        fixed.append(running)
    return HistogramDelta(bounds=bounds, counts=tuple(fixed), count=fixed[-1] if fixed else 0.0, total=total)
