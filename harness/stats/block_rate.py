"""A rate over a fixed span (requests or tokens per second) with a confidence interval, by batch means.

Requests of one load step are not independent (a closed loop sends the next request when one ends; a queue couples
neighbours), so a Poisson interval on the count would be wrong in either direction. Batch means (Law & Kelton,
*Simulation Modeling and Analysis*, ch. 9): cut the span into ``blocks`` equal slices by send time, take the rate of
each slice (its weight over its length) and a Student-t interval over the slices' rates. The mean of the slices is
exactly the step's own rate (total weight over the span); the interval widens with the dependence that the slices
still show. Fewer than :data:`MIN_BLOCKS` slices with weight, or a span too short, gives no interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.stats import t as student_t

BLOCKS = 10
MIN_BLOCKS = 4
MIN_EVENTS_PER_BLOCK = 5  # fewer events than this per slice on average: use fewer slices
RATE_METHOD = "batch means over equal time slices, Student-t"


@dataclass(frozen=True)
class RateCI:
    """A rate (units per second) and its interval; ``lo``/``hi`` None when the span cannot bound it."""

    rate: float
    lo: float | None
    hi: float | None
    blocks: int
    confidence: float

    @property
    def resolved(self) -> bool:
        return self.lo is not None and self.hi is not None


def rate_interval(send_ns: npt.ArrayLike, weights: npt.ArrayLike, start_ns: int, end_ns: int,
                  confidence: float, blocks: int = BLOCKS) -> RateCI | None:
    """The rate of ``weights`` (one per event, sent at ``send_ns``) over ``[start_ns, end_ns]``, with its interval.

    None when the span is empty. Events outside the span are ignored; the number of slices is ``blocks`` or fewer
    (about :data:`MIN_EVENTS_PER_BLOCK` events per slice), and below :data:`MIN_BLOCKS` slices the rate has no
    interval."""
    span_ns = int(end_ns) - int(start_ns)
    if span_ns <= 0:
        return None
    send = np.asarray(send_ns, dtype=np.float64)
    weight = np.asarray(weights, dtype=np.float64)
    inside = (send >= start_ns) & (send <= end_ns) & np.isfinite(weight)
    send, weight = send[inside], weight[inside]
    duration_s = span_ns / 1e9
    rate = float(weight.sum() / duration_s)
    k = min(blocks, int(np.count_nonzero(weight > 0)) // MIN_EVENTS_PER_BLOCK)
    if k < MIN_BLOCKS:
        return RateCI(rate=rate, lo=None, hi=None, blocks=k, confidence=confidence)
    slot = np.minimum(((send - start_ns) / span_ns * k).astype(np.int64), k - 1)
    per_block = np.bincount(slot, weights=weight, minlength=k) / (duration_s / k)
    half = float(student_t.ppf(0.5 + confidence / 2.0, k - 1) * per_block.std(ddof=1) / math.sqrt(k))
    return RateCI(rate=rate, lo=max(rate - half, 0.0), hi=rate + half, blocks=k, confidence=confidence)
