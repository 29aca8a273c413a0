"""A cheap histogram for the hot path, exposed through a prometheus_client collector.

``prometheus_client.Histogram.observe`` takes a lock and validates on every call (~10 us in a loaded
process); inter-token latencies are observed once per streamed token, so the simulator keeps plain bucket
counts here and renders them as a standard histogram family (``_bucket``/``_count``/``_sum``/``_created``) at
scrape time. Single-threaded use only (the engine loop).
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import cast

from prometheus_client import utils as _prom_utils
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.samples import Sample

_go_string = cast(Callable[[float], str], _prom_utils.floatToGoString)  # untyped in prometheus_client


class FastHistogram:
    """Cumulative-on-render bucket counts (``le`` semantics: a value equal to a bound falls in that bucket)."""

    __slots__ = ("bounds", "counts", "created", "doc", "name", "total")

    def __init__(self, name: str, doc: str, bounds: Sequence[float]) -> None:
        self.name = name
        self.doc = doc
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0
        self.created = time.time()

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def family(self, label_names: Sequence[str], label_values: Sequence[str]) -> HistogramMetricFamily:
        buckets: list[tuple[str, float]] = []
        acc = 0
        for bound, n in zip(self.bounds, self.counts, strict=False):
            acc += n
            buckets.append((_go_string(bound), float(acc)))
        acc += self.counts[-1]
        buckets.append(("+Inf", float(acc)))
        fam = HistogramMetricFamily(self.name, self.doc, labels=list(label_names))
        fam.add_metric(list(label_values), buckets, self.total)
        fam.samples.append(Sample(self.name + "_created", dict(zip(label_names, label_values, strict=True)),
                                  self.created))
        return fam
