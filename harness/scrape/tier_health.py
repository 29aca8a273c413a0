"""Per-step tier health (:class:`~harness.schema.tier_health.TierHealth`) from a run's raw scrapes.

The quantities are catalog data (``tier.*``, ``offload.allocation_failures``, ``offload.lookup_*_delay_seconds`` in
``harness/engines/catalogs``); a source with ``split_by: tier`` also gets one figure per label value seen in the step.

Missing is not zero, with one exception that is exact: vLLM registers each offload counter family at start-up and
binds a label set only at its first event, so a family whose ``# TYPE`` line is in the step's last scrape but which
has no sample means "no event since the server started": it reads 0 and is said so in ``declared_empty``. A family
that is not even declared is ``None`` and named in ``missing``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from harness.schema.tier_health import LookupDelay, TierFigures, TierHealth
from harness.scrape.catalog import Catalog, Source
from harness.scrape.quantities import QuantityValue, evaluate_sources
from harness.scrape.series import ScrapeSeries, Window, window_for

TOTALS = {"tier.stores_dropped": "stores_dropped", "tier.blocks_dropped": "blocks_dropped",
          "tier.promotion_failures": "promotion_failures", "tier.cascade_failures": "cascade_failures",
          "tier.promotion_allocation_failures": "promotion_allocation_failures",
          "offload.allocation_failures": "allocation_failures"}
PER_TIER = {"tier.stores_dropped": "stores_dropped", "tier.blocks_dropped": "blocks_dropped",
            "tier.promotion_failures": "promotion_failures", "tier.cascade_failures": "cascade_failures",
            "tier.chunk_queries": "chunk_queries", "tier.chunk_hits": "chunk_hits"}
DELAYS = {"offload.lookup_sync_delay_seconds": "lookup_sync_delay",
          "offload.lookup_async_delay_seconds": "lookup_async_delay"}
QUANTITIES = (*dict.fromkeys([*TOTALS, *PER_TIER]), *DELAYS)


def _family(series: str) -> str:
    for suffix in ("_total", "_bucket", "_count", "_sum"):
        if series.endswith(suffix):
            return series[: -len(suffix)]
    return series


def declared_families(body: str, names: set[str]) -> set[str]:
    """Which of the family ``names`` have a ``# TYPE`` line in an exposition (counters: as ``name_total``)."""
    if not names:
        return set()
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return set(re.findall(rf"^# TYPE ({alternatives})(?:_total)?[ \t]", body, re.MULTILINE))


def _last_body(series: ScrapeSeries, window: Window) -> str:
    indices = [i for i in window.scrape_indices if series.scrapes[i].format == "prometheus"]
    return series.scrapes[max(indices)].body if indices else ""


def _label_values(src: Source, window: Window) -> list[str]:
    assert src.split_by is not None
    name = f"{src.series}_bucket" if src.series.endswith("_seconds") else src.series
    seen: dict[str, None] = {}
    for obs in window.observations:
        for labels, _value in obs.samples.get(name, []):
            value = labels.get(src.split_by)
            if value is not None and src.matches(labels):
                seen.setdefault(value, None)
    return sorted(seen)


def _per_tier(catalog: Catalog, windows: Mapping[str, Window], start_ns: int,
              end_ns: int) -> dict[str, dict[str, float | None]]:
    tiers: dict[str, dict[str, float | None]] = {}
    for quantity, field in PER_TIER.items():
        for src in catalog.sources(quantity):
            window = windows.get(src.format)
            if src.split_by is None or window is None:
                continue
            values = _label_values(src, window)
            for value in values:
                one = src.model_copy(update={"labels": {**src.labels, src.split_by: value}, "split_by": None})
                got = evaluate_sources(quantity, catalog.kind(quantity), [one], one.display(), windows, start_ns,
                                       end_ns)
                tiers.setdefault(value, {})[field] = got.value
            if values:
                break
    return tiers


def _delay(value: QuantityValue) -> LookupDelay | None:
    hist = value.histogram
    if hist is None:
        return None

    def ms(v: float | None) -> float | None:
        return None if v is None else v * 1000.0

    return LookupDelay(count=round(hist.count), p50_ms=ms(hist.quantile(0.5)), p99_ms=ms(hist.quantile(0.99)),
                       mean_ms=ms(hist.mean()))


def step_tier_health(series: ScrapeSeries, catalog: Catalog, start_ns: int, end_ns: int,
                     values: Mapping[str, QuantityValue], *, tiered: bool = True) -> TierHealth:
    """Tier health over ``[start_ns, end_ns]`` from the step's already evaluated ``values`` (plus per-tier splits).

    ``tiered=False`` (a CPU-only spec) does not list the ``tier.*`` series as missing: only a tiering spec has them.
    """
    formats = {src.format for q in QUANTITIES for src in catalog.sources(q)}
    windows: dict[str, Window] = {fmt: window_for(series, catalog, fmt, start_ns, end_ns) for fmt in formats}
    prom = windows.get("prometheus")
    wanted = {_family(src.series) for q in QUANTITIES for src in catalog.sources(q) if src.format == "prometheus"}
    declared = declared_families(_last_body(series, prom), wanted) if prom is not None else set()

    def known(quantity: str) -> tuple[float | None, bool]:
        """(value, declared without samples)."""
        value = values.get(quantity)
        if value is None:
            return None, False
        if value.value is not None:
            return value.value, False
        if value.source is None and any(_family(s.series) in declared for s in catalog.sources(quantity)):
            return 0.0, True
        return None, False

    fields: dict[str, object] = {}
    missing: list[str] = []
    for quantity in QUANTITIES:
        value, _empty = known(quantity)
        qv = values.get(quantity)
        if quantity in TOTALS:
            fields[TOTALS[quantity]] = value
        elif quantity in DELAYS:
            delay = _delay(qv) if qv is not None else None
            fields[DELAYS[quantity]] = delay if delay is not None else (LookupDelay() if value == 0.0 else None)
        if value is None and qv is not None and qv.missing_text and (tiered or not quantity.startswith("tier.")):
            missing.append(qv.missing_text)
    tiers = []
    for name, figures in sorted(_per_tier(catalog, windows, start_ns, end_ns).items()):
        for quantity, field in PER_TIER.items():  # declared family, no sample for this tier: no event on it
            if field not in figures and any(_family(s.series) in declared for s in catalog.sources(quantity)):
                figures[field] = 0.0
        queries, hits = figures.get("chunk_queries"), figures.get("chunk_hits")
        rate = hits / queries if queries and hits is not None else None
        tiers.append(TierFigures.model_validate({"tier": name, "chunk_hit_rate": rate, **figures}))
    return TierHealth.model_validate({**fields, "tiers": tiers, "missing": missing})
