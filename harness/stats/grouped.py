"""Percentiles of many groups at once (one sort by group code, then one sort per group), each with its
order-statistic confidence interval (:mod:`harness.stats.intervals`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from harness.schema.intervals import Percentiles, QuantileCI
from harness.stats.intervals import DEFAULT_CONFIDENCE, QUANTILE_METHOD, interval_from_sorted

QUANTILES = (50.0, 95.0, 99.0)


@dataclass(frozen=True)
class GroupStats:
    """Per group: percentiles (rows = groups, columns = ``qs``), their intervals, mean and count; NaN where a group
    is empty."""

    qs: tuple[float, ...]
    values: npt.NDArray[np.float64]
    mean: npt.NDArray[np.float64]
    count: npt.NDArray[np.int64]
    cis: list[list[QuantileCI]] | None = None  # [group][q]
    confidence: float = DEFAULT_CONFIDENCE

    def ci(self, group: int, q: float) -> QuantileCI | None:
        """The interval of one percentile of one group."""
        if self.cis is None or self.count[group] == 0:
            return None
        return self.cis[group][self.qs.index(q)]

    def percentiles(self, group: int) -> Percentiles:
        """The ``Percentiles`` model of one group (expects ``qs`` to be 50, 95, 99)."""
        count = int(self.count[group])
        if count == 0:
            return Percentiles(count=0)
        p = {q: float(v) for q, v in zip(self.qs, self.values[group], strict=True)}
        return Percentiles(p50=p.get(50.0), p95=p.get(95.0), p99=p.get(99.0), mean=float(self.mean[group]),
                           count=count, p50_ci=self._ci(group, 50.0), p95_ci=self._ci(group, 95.0),
                           p99_ci=self._ci(group, 99.0), confidence=self.confidence, method=QUANTILE_METHOD)

    def _ci(self, group: int, q: float) -> QuantileCI | None:
        return self.ci(group, q) if q in self.qs else None

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
                  qs: tuple[float, ...] = QUANTILES, confidence: float | None = DEFAULT_CONFIDENCE) -> GroupStats:
    """Percentiles (linear interpolation), their intervals (``confidence`` None: none), mean and count of ``values``
    per group; NaN values and codes < 0 skipped."""
    pct = np.full((n_groups, len(qs)), np.nan)
    mean = np.full(n_groups, np.nan)
    count = np.zeros(n_groups, dtype=np.int64)
    empty = QuantileCI(note="no samples")
    cis: list[list[QuantileCI]] | None = None if confidence is None else [[empty] * len(qs)
                                                                          for _ in range(n_groups)]
    conf = DEFAULT_CONFIDENCE if confidence is None else confidence
    keep = ~np.isnan(values) & (codes >= 0) & (codes < n_groups)
    vals, cds = values[keep], codes[keep]
    if len(vals) == 0:
        return GroupStats(qs, pct, mean, count, cis, conf)
    order = np.argsort(_small_codes(cds, n_groups), kind="stable")
    sorted_vals = vals[order]
    count[:] = np.bincount(cds, minlength=n_groups)[:n_groups]
    sums = np.bincount(cds, weights=vals.astype(np.float64), minlength=n_groups)[:n_groups]
    ends = np.cumsum(count)
    starts = ends - count
    for g in np.flatnonzero(count):
        chunk = np.sort(sorted_vals[starts[g]:ends[g]])
        pct[g] = np.percentile(chunk, qs)
        mean[g] = sums[g] / count[g]
        if cis is not None:
            cis[g] = [interval_from_sorted(chunk, q / 100.0, conf) for q in qs]
    return GroupStats(qs, pct, mean, count, cis, conf)


def percentiles_of(values: npt.NDArray[np.floating]) -> Percentiles:
    """Percentiles of one set of values (NaN skipped)."""
    stats = grouped_stats(values, np.zeros(len(values), dtype=np.int64), 1)
    return stats.percentiles(0)
