"""Canonical quantities over a step: the catalog's sources evaluated on the scrapes that bracket it.

Sources are tried in catalog order; the first whose series appear in the step's scrapes is used. Counters give the
reset-robust increase, gauges the maximum, histograms the bucket increase. If no source is present the value is
``None`` and :attr:`QuantityValue.looked_for` names what was searched; if a source is present but cannot give an
exact figure (no scrape before the step), the value is ``None`` with a ``problem``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from harness.scrape.catalog import CANONICAL, Aggregate, Catalog, Kind, Source, Term
from harness.scrape.deltas import HistogramDelta, HistogramReading, counter_increase, histogram_increase
from harness.scrape.parse import Samples, parse_prometheus, parse_trtllm_json
from harness.scrape.series import Observation, ScrapeSeries, Window, window_for


@dataclass(frozen=True)
class QuantityValue:
    """One canonical quantity over one step."""

    quantity: str
    kind: Kind
    value: float | None  # counter increase, gauge maximum, or histogram observation count
    looked_for: str  # series searched, for reports
    source: str | None = None  # the series used
    problem: str | None = None  # why the value is None although a series was found
    histogram: HistogramDelta | None = None

    @property
    def missing_text(self) -> str | None:
        """What a report lists when the value is unknown; None when known."""
        if self.value is not None:
            return None
        return f"{self.looked_for}: {self.problem}" if self.problem else self.looked_for


def _aggregate(values: list[float], how: Aggregate) -> float:
    if how == "max":
        return max(values)
    if how == "mean":
        return sum(values) / len(values)
    return sum(values)


def term_value(term: Term, samples: Samples, how: Aggregate = "sum") -> float | None:
    """Aggregate of every sample matching the term, or None when none matches."""
    rows = samples.get(term.series)
    if not rows:
        return None
    matched = [v for labels, v in rows if term.matches(labels)]
    return _aggregate(matched, how) if matched else None


def source_value(src: Source, samples: Samples) -> float | None:
    """The source's value in one observation (scaled, multiplied/divided by its companion series)."""
    value = term_value(src, samples, src.aggregate)
    if value is None:
        return None
    value *= src.scale
    if src.multiply_by:
        factor = term_value(Term(series=src.multiply_by), samples, "max")
        if factor is None:
            return None
        value *= factor
    if src.divide_by:
        divisor = term_value(Term(series=src.divide_by), samples, "max")
        if not divisor:
            return None
        value /= divisor
    return value if math.isfinite(value) else None


def _readings(values: list[float | None], window: Window) -> list[float] | None:
    """Cumulative readings from the base on; None when the step start is not bracketed."""
    if not window.has_base and not window.known_before:
        return None
    readings = [v for v in values if v is not None]
    if not window.has_base or values[0] is None:
        readings.insert(0, 0.0)  # created during the step (or nothing before it): counters start at zero
    return readings


def _counter(src: Source, window: Window) -> tuple[bool, float | None]:
    obs = window.observations
    main = [source_value(src, o.samples) for o in obs]
    if all(v is None for v in main):
        return False, None
    readings = _readings(main, window)
    if readings is None:
        return True, None
    total = counter_increase(readings)
    for term in src.minus:
        values = [term_value(term, o.samples) for o in obs]
        if all(v is None for v in values):
            return False, None
        sub = _readings(values, window)
        if sub is None:
            return True, None
        total -= counter_increase(sub) * src.scale
    return True, max(total, 0.0)


def _gauge(src: Source, window: Window, start_ns: int, end_ns: int) -> tuple[bool, float | None]:
    inside = [o for o in window.observations if start_ns <= o.mono_ns <= end_ns] or window.observations
    values = [v for v in (source_value(src, o.samples) for o in inside) if v is not None]
    if not values:
        present = any(source_value(src, o.samples) is not None for o in window.observations)
        return present, None
    return True, max(values)


def _histogram_reading(src: Source, obs: Observation) -> HistogramReading | None:
    rows = obs.samples.get(f"{src.series}_bucket")
    if not rows:
        return None
    buckets: dict[float, float] = {}
    for labels, value in rows:
        le = labels.get("le")
        if le is None or not src.matches({k: v for k, v in labels.items() if k != "le"}):
            continue
        try:
            bound = float(le)
        except ValueError:
            continue
        buckets[bound] = buckets.get(bound, 0.0) + value
    if not buckets:
        return None
    bounds = tuple(sorted(buckets))
    total = term_value(Term(series=f"{src.series}_sum", labels=src.labels, label_regex=src.label_regex), obs.samples)
    return HistogramReading(bounds=bounds, counts=tuple(buckets[b] * src.scale for b in bounds),
                            total=(total or 0.0))


def _histogram(src: Source, window: Window) -> tuple[bool, HistogramDelta | None]:
    readings = [_histogram_reading(src, o) for o in window.observations]
    if all(r is None for r in readings):
        return False, None
    if not window.has_base and not window.known_before:
        return True, None
    kept = [r for r in readings if r is not None]
    if not window.has_base or readings[0] is None:
        kept.insert(0, HistogramReading(bounds=(), counts=(), total=0.0))
    return True, histogram_increase(kept)


def evaluate(catalog: Catalog, quantity: str, windows: Mapping[str, Window], start_ns: int,
             end_ns: int) -> QuantityValue:
    """One quantity from the step's windows (one per metrics format)."""
    return evaluate_sources(quantity, catalog.kind(quantity), catalog.sources(quantity), catalog.looked_for(quantity),
                            windows, start_ns, end_ns)


def evaluate_sources(quantity: str, kind: Kind, sources: Iterable[Source], looked_for: str,
                     windows: Mapping[str, Window], start_ns: int, end_ns: int) -> QuantityValue:
    """One quantity from explicit sources (the first present wins), e.g. one label value of a per-tier series."""
    for src in sources:
        window = windows.get(src.format)
        if window is None or not window.observations:
            continue
        if kind == "histogram":
            present, hist = _histogram(src, window)
            if present:
                problem = None if hist is not None else "no scrape at or before the step start"
                return QuantityValue(quantity, kind, hist.count if hist else None, looked_for, src.display(),
                                     problem, hist)
            continue
        present, value = _counter(src, window) if kind == "counter" else _gauge(src, window, start_ns, end_ns)
        if present:
            problem = None if value is not None else "no scrape at or before the step start"
            return QuantityValue(quantity, kind, value, looked_for, src.display(), problem)
    return QuantityValue(quantity, kind, None, looked_for)


def step_quantities(series: ScrapeSeries, catalog: Catalog, start_ns: int, end_ns: int,
                    quantities: Iterable[str] | None = None) -> dict[str, QuantityValue]:
    """Every canonical quantity (or the named ones) between two monotonic times."""
    if end_ns < start_ns:
        raise ValueError(f"step ends ({end_ns}) before it starts ({start_ns})")
    wanted = list(quantities) if quantities is not None else list(CANONICAL)
    formats = {src.format for q in wanted for src in catalog.sources(q)}
    windows: dict[str, Window] = {fmt: window_for(series, catalog, fmt, start_ns, end_ns) for fmt in formats}
    return {q: evaluate(catalog, q, windows, start_ns, end_ns) for q in wanted}


def scrapes_in_step(series: ScrapeSeries, catalog: Catalog, start_ns: int, end_ns: int) -> tuple[int, int]:
    """(scrapes, failed scrapes) inside the step, boundary scrapes included."""
    used: set[int] = set()
    for fmt in {s.format for s in series.scrapes}:
        used |= set(window_for(series, catalog, fmt, start_ns, end_ns).scrape_indices)
    inside = {i for i, s in enumerate(series.scrapes) if start_ns <= s.mono_ns <= end_ns} | used
    failed = sum(1 for i in inside if not series.scrapes[i].ok or series.parse_failed(i))
    return len(inside), failed


def exposition_quantities(bodies: dict[str, str], catalog: Catalog,
                          quantities: Iterable[str] | None = None) -> dict[str, QuantityValue]:
    """Cumulative values in single expositions, keyed by format (``{"prometheus": text, "trtllm-json": text}``).

    Counters read as their value since the server started, histograms as all observations so far: what a
    one-off probe of a server shows. Bodies that do not parse raise :class:`~harness.scrape.parse.ParseError`.
    """
    windows: dict[str, Window] = {}
    for fmt, body in bodies.items():
        entries = parse_trtllm_json(body) if fmt == "trtllm-json" else [parse_prometheus(body)]
        windows[fmt] = Window([Observation(0, s) for s in entries], has_base=False, known_before=True,
                              scrape_indices=[])
    wanted = list(quantities) if quantities is not None else list(CANONICAL)
    return {q: evaluate(catalog, q, windows, 0, 0) for q in wanted}
