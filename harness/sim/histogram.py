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

    __slots__ = ("_family", "_family_key", "_les", "_templates", "bounds", "counts", "created", "doc", "name",
                 "observed", "total")

    def __init__(self, name: str, doc: str, bounds: Sequence[float]) -> None:
        self.name = name
        self.doc = doc
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0
        self.created = time.time()
        self.observed = 0  # observations so far: the family is rebuilt only after a new one
        self._les = [*(_go_string(b) for b in self.bounds), "+Inf"]
        self._family: HistogramMetricFamily | None = None
        self._family_key: tuple[tuple[str, ...], tuple[str, ...], int] | None = None
        self._templates: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[list[dict[str, str]],
                                                                              dict[str, str]]] = {}

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value
        self.observed += 1

    @property
    def count(self) -> int:
        return sum(self.counts)

    def family(self, label_names: Sequence[str], label_values: Sequence[str]) -> HistogramMetricFamily:
        """The histogram family: the samples ``HistogramMetricFamily.add_metric`` makes (bucket label sets built
        once) plus ``_created``; the same object while nothing was observed since (readers must not change it)."""
        names, values = tuple(label_names), tuple(label_values)
        key = (names, values, self.observed)
        if self._family is not None and key == self._family_key:
            return self._family
        template = self._templates.get((names, values))
        if template is None:
            pairs = list(zip(names, values, strict=True))  # add_metric: dict([*zip(names, values), ("le", le)])
            template = self._templates[(names, values)] = (
                [dict([*pairs, ("le", le)]) for le in self._les], dict(pairs))
        bucket_labels, plain = template
        name = self.name
        bucket = name + "_bucket"
        fam = HistogramMetricFamily(name, self.doc, labels=list(names))
        samples = fam.samples
        acc = 0
        for labels, n in zip(bucket_labels, self.counts, strict=True):
            acc += n
            samples.append(Sample(bucket, labels, float(acc)))
        if float(self._les[0]) >= 0:  # as add_metric: no _count/_sum with negative buckets
            samples.append(Sample(name + "_count", plain, float(acc)))
            samples.append(Sample(name + "_sum", plain, self.total))
        samples.append(Sample(name + "_created", plain, self.created))
        self._family, self._family_key = fam, key
        return fam
