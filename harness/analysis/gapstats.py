"""Exact inter-token-gap percentiles per window and per step, for tens of millions of gaps.

Every gap of a measured, successful request is packed into one 64-bit key: window code in the high 32 bits, the gap
in milliseconds as float32 bits in the low 32 (non-negative floats order like their bit patterns); gaps that do not
count get the largest key. One in-place sort then groups by window and orders by value: window percentiles are
direct lookups, and a step's order statistics are found by bisection over the value bits, counting with one
``searchsorted`` across the step's windows. Keys are built block by block straight from the Arrow chunk-time
buffers: the key array is the only allocation proportional to the number of gaps.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from harness.analysis.latency import list_column
from harness.analysis.prepare import Prepared, WindowLayout
from harness.schema.intervals import Percentiles, QuantileCI
from harness.stats.intervals import DEFAULT_CONFIDENCE, QUANTILE_METHOD, ci_from_ranks, quantile_ranks

BLOCK = 1 << 15
U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
_LOW = np.uint64(0xFFFFFFFF)
_SKIP = np.uint64(np.iinfo(np.uint64).max)
_SHIFT = np.uint64(32)


def _values(keys: U64) -> npt.NDArray[np.float32]:
    return (keys & _LOW).astype(np.uint32).view(np.float32)


@dataclass(frozen=True)
class GapStats:
    """Sorted gap keys, where each window's run starts (one entry per window plus one) and per-window sums (ms)."""

    keys: U64
    bounds: I64
    sums: F64
    layout: WindowLayout

    def window_quantile(self, q: float) -> F64:
        """The q-th percentile (0..100, numpy 'linear') of every window; NaN for empty windows."""
        start, stop = self.bounds[:-1], self.bounds[1:]
        n = stop - start
        out = np.full(len(n), np.nan)
        has = n > 0
        pos = (q / 100.0) * (n[has] - 1)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, n[has] - 1)
        v_lo = _values(self.keys[start[has] + lo]).astype(np.float64)
        v_hi = _values(self.keys[start[has] + hi]).astype(np.float64)
        out[has] = v_lo + (v_hi - v_lo) * (pos - lo)
        return out

    def window_interval(self, window: int, q: float, n_requests: int,
                        confidence: float = DEFAULT_CONFIDENCE) -> QuantileCI | None:
        """The q-th percentile's interval in one window, with the window's requests as the sample size (gaps of
        one request are correlated: ranks are computed for ``n_requests`` and scaled onto the gaps)."""
        start, stop = int(self.bounds[window]), int(self.bounds[window + 1])
        n = stop - start
        if n == 0:
            return None
        return _scaled_ci(n, max(1, min(n, n_requests)), q / 100.0, confidence,
                          lambda rank: float(_values(self.keys[start + rank:start + rank + 1])[0]))

    def _windows(self, group: int) -> I64:
        first = int(self.layout.base[group])
        return np.arange(first, first + int(self.layout.count[group]), dtype=np.int64)

    def _order_stat(self, windows: I64, rank: int) -> float:
        """The ``rank``-th smallest gap (0-based) over the given windows, by bisection on the float32 bits."""
        prefix = windows.astype(np.uint64) << _SHIFT
        lo_bits, hi_bits = 0, 0x7F800000  # [0, +inf] as float32 bit patterns
        while lo_bits < hi_bits:
            mid = (lo_bits + hi_bits) // 2
            seen = np.searchsorted(self.keys, prefix | np.uint64(mid), side="right") - self.bounds[windows]
            if int(seen.sum()) > rank:
                hi_bits = mid
            else:
                lo_bits = mid + 1
        return float(np.array([lo_bits], dtype=np.uint32).view(np.float32)[0])

    def group_percentiles(self, group: int, qs: tuple[float, ...] = (50.0, 95.0, 99.0), n_requests: int | None = None,
                          confidence: float = DEFAULT_CONFIDENCE) -> Percentiles:
        """Percentiles (numpy 'linear'), their intervals (sample size: ``n_requests``, the requests the gaps came
        from; see :meth:`window_interval`), mean and count of every gap in one group's windows."""
        windows = self._windows(group)
        count = int(self.bounds[windows[-1] + 1] - self.bounds[windows[0]]) if len(windows) else 0
        if count == 0:
            return Percentiles(count=0)
        values: dict[float, float] = {}
        for q in qs:
            pos = (q / 100.0) * (count - 1)
            lo = int(np.floor(pos))
            v_lo = self._order_stat(windows, lo)
            v_hi = self._order_stat(windows, min(lo + 1, count - 1)) if pos > lo else v_lo
            values[q] = v_lo + (v_hi - v_lo) * (pos - lo)
        mean = float(self.sums[windows].sum() / count)
        n_eff = count if n_requests is None else max(1, min(count, n_requests))
        cis = {q: _scaled_ci(count, n_eff, q / 100.0, confidence, lambda r: self._order_stat(windows, r)) for q in qs}
        return Percentiles(p50=values.get(50.0), p95=values.get(95.0), p99=values.get(99.0), mean=mean, count=count,
                           p50_ci=cis.get(50.0), p95_ci=cis.get(95.0), p99_ci=cis.get(99.0), confidence=confidence,
                           method=QUANTILE_METHOD + "; sample size = requests, not gaps")


def _scaled_ci(n: int, n_eff: int, q: float, confidence: float, value_at: Callable[[int], float]) -> QuantileCI:
    """An order-statistic interval computed for ``n_eff`` observations and read off ``n`` sorted values."""
    ranks = quantile_ranks(n_eff, q, confidence)

    def pick(rank: int) -> float:
        return float(value_at(max(0, min(n - 1, -(-rank * n // n_eff) - 1))))

    return ci_from_ranks(ranks, q, pick, unit="requests")


@dataclass(frozen=True)
class _RowMaps:
    """Per request row: group (-1: skip), its group's start, window count and first window."""

    group: I64
    start: I64
    count: I64
    base: I64


def _row_maps(prep: Prepared, layout: WindowLayout) -> _RowMaps:
    group = np.where(prep.ok, prep.row_group, -1)
    g = np.maximum(group, 0)
    if not prep.groups:
        zero = np.zeros(len(group), dtype=np.int64)
        return _RowMaps(group, zero, zero + 1, zero)
    return _RowMaps(group, prep.start[g], layout.count[g], layout.base[g])


def _block_keys(values: I64, offsets: I64, lo: int, hi: int, row0: int, maps: _RowMaps, inv_window: float,
                sums: F64) -> U64:
    """Keys of the gaps ending at value positions ``lo .. hi-1`` of one Arrow chunk (``lo`` >= 1)."""
    r_first = int(np.searchsorted(offsets, lo, side="right")) - 1
    r_last = int(np.searchsorted(offsets, hi - 1, side="right")) - 1
    seg = np.minimum(offsets[r_first + 1:r_last + 2], hi) - np.maximum(offsets[r_first:r_last + 1], lo)
    local = np.repeat(np.arange(r_first, r_last + 1, dtype=np.int64), np.maximum(seg, 0))
    rows = local + row0
    keep = (np.arange(lo, hi, dtype=np.int64) > offsets[local]) & (maps.group[rows] >= 0)
    t = values[lo:hi]
    gap_ms = ((t - values[lo - 1:hi - 1]) * 1e-6).astype(np.float32)
    np.maximum(gap_ms, np.float32(0.0), out=gap_ms)
    k = ((t - maps.start[rows]) * inv_window).astype(np.int64)
    np.clip(k, 0, maps.count[rows] - 1, out=k)
    window = maps.base[rows] + k
    sums += np.bincount(window[keep], weights=gap_ms[keep], minlength=len(sums))
    keys = (window.astype(np.uint64) << _SHIFT) | gap_ms.view(np.uint32).astype(np.uint64)
    keys[~keep] = _SKIP
    return keys


def gap_stats(prep: Prepared, layout: WindowLayout, *, block: int = BLOCK) -> GapStats:
    """Sorted gap keys of every measured, successful request of ``prep`` under ``layout``."""
    df = prep.df
    chunks = list_column(df, "chunk_ns").chunks if "chunk_ns" in df.columns and len(df) else []
    total = sum(max(len(arr.values) - 1, 0) for arr in chunks)
    out = np.empty(total, dtype=np.uint64)  # pages are only touched as keys are written
    sums = np.zeros(layout.total, dtype=np.float64)
    maps = _row_maps(prep, layout)
    inv_window = 1.0 / layout.window_ns
    written = 0
    row0 = 0
    for arr in chunks:
        offsets = np.asarray(arr.offsets, dtype=np.int64)
        values = np.asarray(arr.values.to_numpy(zero_copy_only=False), dtype=np.int64)
        if arr.null_count:
            nulls = ~np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            group = maps.group.copy()
            group[row0:row0 + len(arr)][nulls] = -1
            maps = _RowMaps(group, maps.start, maps.count, maps.base)
        for lo in range(int(offsets[0]) + 1, int(offsets[-1]), block):
            hi = min(lo + block, int(offsets[-1]))
            keys = _block_keys(values, offsets, lo, hi, row0, maps, inv_window, sums)
            out[written:written + len(keys)] = keys
            written += len(keys)
        row0 += len(arr)
    keys_all = out[:written]
    keys_all.sort()
    used = int(np.searchsorted(keys_all, _SKIP, side="left"))
    keys_used = keys_all[:used]
    edges = np.arange(layout.total + 1, dtype=np.uint64) << _SHIFT
    bounds = np.searchsorted(keys_used, edges).astype(np.int64)
    return GapStats(keys_used, bounds, sums, layout)
