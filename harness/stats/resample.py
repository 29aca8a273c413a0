"""Bootstrap replicates of a send-ordered series: iid, circular block or stationary, drawn by ``arch.bootstrap``.

Requests of one load step are not independent: in a closed loop a request is sent when another ends, and a queue
couples neighbours, so consecutive latencies are correlated. A **block bootstrap** resamples runs of consecutive
observations and keeps that dependence inside each run; an iid bootstrap (every observation drawn on its own)
understates the variance of a statistic of a positively correlated series, so its intervals are too narrow.

* **Drawing**: ``arch.bootstrap.IIDBootstrap``, ``CircularBlockBootstrap`` (Politis & Romano 1992: fixed blocks,
  wrapping around the end) or ``StationaryBootstrap`` (Politis & Romano 1994: blocks of geometric length with the
  given mean), one object per independent sample, seeded from that sample's own values (and a side tag), so a
  rebuild draws the same replicates. arch draws one replicate's indices per ``update_indices()`` call; the iid
  and circular draws are those calls' indices vectorised over the replicates by hand (:func:`_block_counts`,
  the same generator calls, so the same replicates; the stationary one calls arch).
* **Block length**: ``arch.bootstrap.optimal_block_length`` (Politis & White 2004, with Patton, Politis & White's
  2009 correction), on the series' **ranks** (ties share their average rank): the estimate rests on autocovariances,
  which a heavy latency tail would dominate; ranks keep the dependence and drop the tail's weight. At least 1 and at
  most a tenth of the series; the circular bootstrap takes the rounded length.
* **Paired** samples (the same requests in two arms) are one bootstrap over both series: the same indices for both.
* **Which bootstrap**: chosen by measured coverage (``tools/bench/coverage.py``, ``docs/statistics.md``): on
  AR(1) lognormal latencies and M/M/1 sojourn times the iid bootstrap's nominal 95% intervals covered the true ratio
  35-78% of the time, the block bootstraps 81-95% (circular and stationary within a point of each other); the
  circular one is the default (:data:`harness.stats.intervals.DEFAULT_METHOD`).

A replicate is kept as **counts** (how often each observation was drawn; ``B x n``), so every statistic is
vectorised over the replicates: a quantile is read off the cumulative counts in value order (exactly numpy's
default ``linear`` quantile of the resampled values), a sum is a matrix-vector product. Replicates of a series are
cached (by a digest of the series and the draw's settings), so the many comparisons one sample enters (percentiles,
arms, the A/A floor) draw it once.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
Method = Literal["iid", "circular", "stationary"]
METHODS: tuple[Method, ...] = ("iid", "circular", "stationary")
DEFAULT_REPLICATES = 2000
MAX_BLOCK_SHARE = 0.1  # a block at most this share of the series
BLOCK_SCALE = 1.0  # the Politis-White length times this (the coverage study's knob: --block-scale)
MIN_BLOCK_SERIES = 12  # below this many observations the block length is 1 (optimal_block_length needs a series)
_QUANTILES_KEPT = 64  # quantile replicates remembered per draw
CACHE_BYTES = 256 * 2**20  # replicates kept for reuse (a 600-request series' 2000 replicates: 4.8 MB)

METHOD_TEXT: dict[Method, str] = {
    "iid": "iid bootstrap",
    "circular": "circular block bootstrap",
    "stationary": "stationary bootstrap",
}


def seed_of(*arrays: npt.ArrayLike, tag: str = "") -> int:
    """A seed derived from the values (and ``tag``): the same data draws the same replicates."""
    digest = hashlib.blake2b(tag.encode(), digest_size=8)
    for arr in arrays:
        digest.update(np.ascontiguousarray(np.asarray(arr, dtype=np.float64)).tobytes())
    return int.from_bytes(digest.digest(), "big")


def block_length(*series: npt.ArrayLike, method: Method) -> float:
    """The block length for ``method`` (1 for iid): ``optimal_block_length`` on each series' ranks, the largest
    of them (paired series share their blocks), clipped to ``[1, MAX_BLOCK_SHARE x n]``."""
    if method == "iid":
        return 1.0
    arrays = [np.asarray(s, dtype=np.float64) for s in series]
    n = min(len(a) for a in arrays)
    if n < MIN_BLOCK_SERIES:
        return 1.0
    from scipy.stats import rankdata

    ranks = np.column_stack([rankdata(a, method="average") for a in arrays])  # ties share a rank (0/1 flags)
    if float(np.ptp(ranks, axis=0).min()) == 0.0:
        return 1.0
    from arch.bootstrap import optimal_block_length  # arch (and statsmodels) load in ~1 s: only when drawing

    table = optimal_block_length(ranks)
    column = "circular" if method == "circular" else "stationary"
    value = float(table[column].max()) * BLOCK_SCALE
    if not math.isfinite(value):
        return 1.0
    return float(min(max(value, 1.0), max(1.0, MAX_BLOCK_SHARE * n)))


@dataclass(frozen=True)
class Draw:
    """The replicates of one bootstrap: ``counts[r, i]`` = how often observation ``i`` is in replicate ``r``."""

    counts: npt.NDArray[np.int32]
    method: Method
    block: float
    # quantile replicates already computed, by (digest of the values, q): a sequential look compares the same
    # reference sample at every look, and the summary the same sample in several rules (kept with the draw, so
    # they go when it leaves the cache)
    _quantiles: dict[tuple[bytes, float], F64] = field(default_factory=dict, compare=False, repr=False)

    @property
    def replicates(self) -> int:
        return int(self.counts.shape[0])

    @property
    def nbytes(self) -> int:
        """The memory it holds: the counts and the quantiles it remembers."""
        return int(self.counts.nbytes) + sum(int(a.nbytes) for a in self._quantiles.values())

    def total(self, values: F64) -> F64:
        """The sum of each replicate's resampled ``values``."""
        return np.asarray(self.counts @ np.asarray(values, dtype=np.float64), dtype=np.float64)

    def quantile(self, values: F64, q: float) -> F64:
        """The q-quantile of each replicate's resampled ``values`` (numpy's ``linear`` method, as
        ``np.quantile(values[indices], q)`` per replicate, without materialising the resamples). Remembered per
        values and q (the same arrays come back: a read-only copy)."""
        x = np.asarray(values, dtype=np.float64)
        digest = hashlib.blake2b(np.ascontiguousarray(x).tobytes(), digest_size=16).digest()
        found = self._quantiles.get((digest, q))
        if found is not None:
            return found
        order = np.argsort(x, kind="stable")
        sorted_x = x[order]
        cum = np.cumsum(self.counts[:, order], axis=1, dtype=np.int32)  # replicate's count at or below each value
        n = len(x)
        pos = q * (n - 1)
        lo = math.floor(pos)
        frac = pos - lo
        at_lo = _value_at(cum, sorted_x, lo)
        if frac == 0.0 or lo + 1 >= n:
            result = at_lo
        else:
            result = np.asarray(at_lo + frac * (_value_at(cum, sorted_x, lo + 1) - at_lo), dtype=np.float64)
        result.setflags(write=False)
        if len(self._quantiles) < _QUANTILES_KEPT:
            self._quantiles[(digest, q)] = result
        return result


def _value_at(cum: npt.NDArray[np.int32], sorted_x: F64, k: int) -> F64:
    """The k-th (0-based) order statistic of every replicate: the first value whose cumulative count exceeds k."""
    return np.asarray(sorted_x[np.argmax(cum > k, axis=1)], dtype=np.float64)


def _block_counts(generator: np.random.Generator, n: int, size: int, replicates: int) -> npt.NDArray[np.int32]:
    """The counts of ``replicates`` circular-block replicates (``size`` 1: iid), all drawn at once.

    Hand-vectorised for speed, and exactly arch's draws: ``IIDBootstrap.update_indices`` draws
    ``generator.integers(n, size=n)`` and ``CircularBlockBootstrap.update_indices`` ``generator.integers(n,
    size=ceil(n / size))`` block starts per replicate, then takes ``size`` consecutive indices (mod n) from each
    start and keeps the first n; one ``integers`` call of shape ``(replicates, blocks)`` consumes the generator
    exactly as that many calls in turn do (checked against arch in ``tests/unit/stats``)."""
    blocks = -(-n // size)
    counts = np.empty((replicates, n), dtype=np.int32)
    chunk = max(1, (1 << 22) // max(1, blocks * size))  # replicates per pass: ~4M indices at a time
    for first in range(0, replicates, chunk):
        rows = min(chunk, replicates - first)
        starts = generator.integers(n, size=(rows, blocks), dtype=np.int64)
        if size == 1:
            idx = starts
        else:
            idx = ((starts[:, :, None] + np.arange(size, dtype=np.int64)).reshape(rows, blocks * size) % n)[:, :n]
        flat = idx + (np.arange(rows, dtype=np.int64) * n)[:, None]
        counts[first:first + rows] = np.bincount(flat.ravel(), minlength=rows * n).reshape(rows, n)
    return counts


_CACHE: OrderedDict[tuple[int, int, Method, float, int], Draw] = OrderedDict()


def draw(*series: npt.ArrayLike, method: Method, replicates: int = DEFAULT_REPLICATES, tag: str = "",
         block: float | None = None) -> Draw:
    """``replicates`` bootstrap replicates of the series (several: paired, the same indices for all), in their
    order, seeded from their values and ``tag``; ``block`` overrides :func:`block_length`."""
    arrays = [np.asarray(s, dtype=np.float64) for s in series]
    if not arrays or any(len(a) != len(arrays[0]) for a in arrays):
        raise ValueError("draw: give one or more series of the same length")
    n = len(arrays[0])
    if n == 0:
        raise ValueError("draw: empty series")
    seed = seed_of(*arrays, tag=tag)
    key = (seed, n, method, -BLOCK_SCALE if block is None else float(block), replicates)
    cached = _CACHE.get(key)
    if cached is not None:
        _CACHE.move_to_end(key)
        return cached
    size = block_length(*arrays, method=method) if block is None else float(block)
    if method == "circular":
        size = float(max(1, round(size)))  # the circular bootstrap's blocks have one length
    generator = np.random.default_rng(seed)
    if method == "stationary":
        from arch.bootstrap import StationaryBootstrap

        # arch annotates block_size as int; for this bootstrap it is the mean block length (p = 1 / block_size) and
        # its own optimal_block_length gives it as a float
        boot = StationaryBootstrap(size, arrays[0], seed=generator)  # type: ignore[arg-type]
        counts = np.empty((replicates, n), dtype=np.int32)
        for r in range(replicates):
            counts[r] = np.bincount(np.asarray(boot.update_indices(), dtype=np.int64), minlength=n)
    else:
        counts = _block_counts(generator, n, 1 if method == "iid" else int(size), replicates)
    result = Draw(counts=counts, method=method, block=size)
    _CACHE[key] = result
    while len(_CACHE) > 1 and sum(d.nbytes for d in _CACHE.values()) > CACHE_BYTES:
        _CACHE.popitem(last=False)
    return result
