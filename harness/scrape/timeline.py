"""Canonical samples over time, one row per scrape and quantity (``metrics/<arm>/samples.parquet``, for charts).

Counters carry their raw cumulative ``value`` and ``increase`` (reset-robust, since the first scrape); gauges carry
``value`` only. Each quantity uses the first catalog source present anywhere in the series; quantities with none
present have no rows (and are listed by :func:`step_server_stats` as missing). Histograms are left out: their
per-step percentiles are in ``summary.json``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.rundir.layout import SAMPLES_FILE
from harness.scrape.catalog import CANONICAL, Catalog, Source
from harness.scrape.quantities import source_value, term_value
from harness.scrape.series import Observation, ScrapeSeries

COLUMNS = ("mono_ns", "wall_ns", "quantity", "source", "value", "increase")


def _observations(series: ScrapeSeries, catalog: Catalog, fmt: str) -> list[tuple[int, Observation]]:
    keep = frozenset(catalog.needed_series("prometheus")) if fmt == "prometheus" else None
    out: list[tuple[int, Observation]] = []
    for i, scrape in enumerate(series.scrapes):
        if scrape.format != fmt or not scrape.ok:
            continue
        for samples in series.parsed(i, keep, f"{catalog.name}:{fmt}") or []:
            out.append((scrape.wall_ns, Observation(scrape.mono_ns, samples)))
    return out


def _value(src: Source, obs: Observation) -> float | None:
    value = source_value(src, obs.samples)
    if value is None:
        return None
    for term in src.minus:
        sub = term_value(term, obs.samples)
        if sub is None:
            return None
        value -= sub * src.scale
    return value


def quantity_timeline(series: ScrapeSeries, catalog: Catalog) -> pd.DataFrame:
    """Every counter and gauge quantity at every scrape (columns: :data:`COLUMNS`)."""
    rows: list[tuple[int, int, str, str, float, float | None]] = []
    by_format: dict[str, list[tuple[int, Observation]]] = {}
    for quantity, (kind, _doc) in CANONICAL.items():
        if kind == "histogram":
            continue
        for src in catalog.sources(quantity):
            if src.format not in by_format:
                by_format[src.format] = _observations(series, catalog, src.format)
            points = [(wall, obs.mono_ns, v) for wall, obs in by_format[src.format]
                      if (v := _value(src, obs)) is not None]
            if not points:
                continue
            total, prev = 0.0, None
            for wall, mono, value in points:
                if kind == "counter":
                    total += 0.0 if prev is None else (value - prev if value >= prev else value)
                    prev = value
                rows.append((mono, wall, quantity, src.display(), value, total if kind == "counter" else None))
            break
    return pd.DataFrame(rows, columns=list(COLUMNS))


def write_samples(series: ScrapeSeries, catalog: Catalog, metrics_dir: Path) -> Path:
    """Write :func:`quantity_timeline` to ``metrics_dir/samples.parquet`` (atomically) and return its path."""
    frame = quantity_timeline(series, catalog)
    schema = pa.schema([("mono_ns", pa.int64()), ("wall_ns", pa.int64()), ("quantity", pa.string()),
                        ("source", pa.string()), ("value", pa.float64()), ("increase", pa.float64())])
    table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
    metrics_dir.mkdir(parents=True, exist_ok=True)
    path = metrics_dir / SAMPLES_FILE
    tmp = path.with_name(f".{SAMPLES_FILE}.tmp")
    pq.write_table(table, tmp)
    tmp.replace(path)
    return path
