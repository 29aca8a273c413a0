"""Percentiles of many groups at once (one sort by group code, then a partition per group)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from harness.summary import Percentiles

QUANTILES = (50.0, 95.0, 99.0)


@dataclass(frozen=True)
class GroupStats:
    """Per group: percentiles (rows = groups, columns = ``qs``), mean and count; NaN where a group is empty."""

    qs: tuple[float, ...]
    values: npt.NDArray[np.float64]
    mean: npt.NDArray[np.float64]
    count: npt.NDArray[np.int64]

    def percentiles(self, group: int) -> Percentiles:
        """The ``Percentiles`` model of one group (expects ``qs`` to be 50, 95, 99)."""
        count = int(self.count[group])
        if count == 0:
            return Percentiles(count=0)
        p = {q: float(v) for q, v in zip(self.qs, self.values[group], strict=True)}
        return Percentiles(p50=p.get(50.0), p95=p.get(95.0), p99=p.get(99.0), mean=float(self.mean[group]),
                           count=count)

    def value(self, group: int, q: float) -> float | None:
        """One percentile of one group, None when empty."""
        if self.count[group] == 0:
            return None
        return float(self.values[group][self.qs.index(q)])


def _small_codes(codes: npt.NDArray[np.int64], n_groups: int) -> npt.NDArray[np.integer]:
    # Stable argsort of small integers is a radix sort in numpy: linear time.
    if n_groups < 2**15:
        return codes.astype(np.int16)
    return codes.astype(np.int32) if n_groups < 2**31 else codes


def grouped_stats(values: npt.NDArray[np.floating], codes: npt.NDArray[np.int64], n_groups: int,
                  qs: tuple[float, ...] = QUANTILES) -> GroupStats:
    """Percentiles (linear interpolation), mean and count of ``values`` per group; NaN values and codes < 0 skipped."""
    pct = np.full((n_groups, len(qs)), np.nan)
    mean = np.full(n_groups, np.nan)
    count = np.zeros(n_groups, dtype=np.int64)
    keep = ~np.isnan(values) & (codes >= 0) & (codes < n_groups)
    vals, cds = values[keep], codes[keep]
    if len(vals) == 0:
        return GroupStats(qs, pct, mean, count)
    order = np.argsort(_small_codes(cds, n_groups), kind="stable")
    sorted_vals = vals[order]
    count[:] = np.bincount(cds, minlength=n_groups)[:n_groups]
    sums = np.bincount(cds, weights=vals.astype(np.float64), minlength=n_groups)[:n_groups]
    ends = np.cumsum(count)
    starts = ends - count
    for g in np.flatnonzero(count):
        chunk = sorted_vals[starts[g]:ends[g]]
        pct[g] = np.percentile(chunk, qs)
        mean[g] = sums[g] / count[g]
    return GroupStats(qs, pct, mean, count)


def percentiles_of(values: npt.NDArray[np.floating]) -> Percentiles:
    """Percentiles of one set of values (NaN skipped)."""
    stats = grouped_stats(values, np.zeros(len(values), dtype=np.int64), 1)
    return stats.percentiles(0)
