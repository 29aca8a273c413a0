"""A run's raw scrapes -> per-step server figures for ``summary.json`` (``ServerStep`` and ``HitTokens``).

Entry points: :func:`load_scrapes` (read ``metrics/<arm>/scrapes.jsonl.gz`` back, tolerant of a truncated tail) and
:func:`step_server_stats` (one step's counter deltas, gauge maxima and server-side percentiles). A series that is not
there gives ``None`` and its looked-for names in ``missing``; :func:`describe_missing` renders them as report lines.
"""

from __future__ import annotations

from collections.abc import Iterable

from harness.schema.intervals import Percentiles, QuantileCI
from harness.schema.summary import HitTokens, ServerStep
from harness.schema.tier_health import TierHealth
from harness.scrape.catalog import Catalog
from harness.scrape.deltas import HistogramDelta
from harness.scrape.quantities import QuantityValue, scrapes_in_step, step_quantities
from harness.scrape.series import ScrapeSeries, load_scrapes, series_from_bodies
from harness.scrape.tier_health import step_tier_health
from harness.stats.intervals import DEFAULT_CONFIDENCE, quantile_ranks

__all__ = ["ScrapeSeries", "cache_config_blocks", "describe_missing", "load_scrapes", "series_from_bodies",
           "server_percentiles", "step_server_stats"]

HIT_QUANTITIES = {"hit_tokens.gpu": "gpu", "hit_tokens.cpu": "cpu", "hit_tokens.disk": "disk",
                  "recomputed_tokens": "miss", "prompt_tokens": "prompt", "hit_tokens.total": "cached"}
SERVER_COUNTERS = {"preemptions": "preemptions", "offload.store_bytes": "offload_store_bytes",
                   "offload.load_bytes": "offload_load_bytes", "disk.read_bytes": "disk_read_bytes",
                   "disk.write_bytes": "disk_write_bytes"}
SERVER_GAUGES = {"kv_usage": "kv_usage_max", "cpu_tier_pinned": "cpu_tier_pinned_max",
                 "cpu_tier_usage": "cpu_tier_fill_max", "running": "running_max", "waiting": "waiting_max"}
# Figures an engine may lack by design without it being news: not listed as missing where its catalog has no source.
_QUIET_WHEN_NOT_EXPOSED = {"cpu_tier_usage", "cpu_tier_pinned"}
SERVER_HISTOGRAMS = {"ttft_seconds": "ttft_ms", "itl_seconds": "itl_ms"}
# Tier hits that only mean something with an offload tier (not listed as missing on a GPU-only arm).
_TIER_HITS = {"hit_tokens.cpu", "hit_tokens.disk"}
# vLLM's cache configuration as labels of one info gauge: the GPU KV cache's size in blocks, and the block's tokens.
CACHE_CONFIG_INFO = "vllm:cache_config_info"
_CACHE_CONFIG_KEEP = frozenset({CACHE_CONFIG_INFO})


def server_percentiles(hist: HistogramDelta | None, *, to_ms: float = 1000.0) -> Percentiles | None:
    """p50/p95/p99/mean (ms) from a histogram increase; None when the histogram was not there."""
    if hist is None:
        return None

    def ms(value: float | None) -> float | None:
        return None if value is None else value * to_ms

    n = round(hist.count)

    def ci(q: float) -> QuantileCI | None:
        """Order-statistic ranks mapped to bucket edges: distribution-free, as wide as the buckets make it."""
        if n <= 0:
            return None
        ranks = quantile_ranks(n, q, DEFAULT_CONFIDENCE)
        lo = ms(hist.rank_bounds(ranks.lower)[0]) if ranks.lower >= 1 else None
        hi = ms(hist.rank_bounds(ranks.upper)[1]) if ranks.upper <= n else None
        note = None if lo is not None and hi is not None else f"unresolved: {n} observations (or an open top bucket)"
        return QuantileCI(lo=lo, hi=hi, resolved=note is None, n=n, note=note)

    return Percentiles(p50=ms(hist.quantile(0.50)), p95=ms(hist.quantile(0.95)), p99=ms(hist.quantile(0.99)),
                       mean=ms(hist.mean()), count=n, p50_ci=ci(0.50), p95_ci=ci(0.95), p99_ci=ci(0.99),
                       confidence=DEFAULT_CONFIDENCE,
                       method="order statistics mapped to the server histogram's bucket edges")


def _label_int(labels: dict[str, str], key: str) -> int | None:
    try:
        value = int(labels.get(key, ""))
    except ValueError:  # "None": not resolved, or not this engine's key
        return None
    return value if value > 0 else None


def cache_config_blocks(series: ScrapeSeries, start_mono_ns: int, end_mono_ns: int) -> tuple[int | None, int | None]:
    """``(num_gpu_blocks, block_size)`` from the labels of ``vllm:cache_config_info`` in the scrape at or before the
    step's end (else the first after its start); ``(None, None)`` where the server does not expose them.

    At most two scrapes are parsed per step (the labels are fixed for a server's life)."""
    good = [i for i, s in enumerate(series.scrapes) if s.format == "prometheus" and s.ok]
    before = [i for i in good if series.scrapes[i].mono_ns <= end_mono_ns]
    after = [i for i in good if series.scrapes[i].mono_ns >= start_mono_ns]
    for index in dict.fromkeys([*before[-1:], *after[:1]]):
        parsed = series.parsed(index, _CACHE_CONFIG_KEEP, "cache-config")
        rows = parsed[-1].get(CACHE_CONFIG_INFO) if parsed else None
        if rows:
            labels = rows[0][0]
            return _label_int(labels, "num_gpu_blocks"), _label_int(labels, "block_size")
    return None, None


def _listed(value: QuantityValue, catalog: Catalog, offload: bool) -> bool:
    if value.value is not None:
        return False
    if value.quantity in _QUIET_WHEN_NOT_EXPOSED and not catalog.sources(value.quantity):
        return False
    if offload:
        return True
    return value.quantity not in catalog.offload_only and value.quantity not in _TIER_HITS


def step_server_stats(series: ScrapeSeries, catalog: Catalog, start_mono_ns: int, end_mono_ns: int, *,
                      offload: bool = True, tiered: bool = True) -> tuple[ServerStep, HitTokens]:
    """Server figures for the step ``[start_mono_ns, end_mono_ns]`` (``time.perf_counter_ns`` clock).

    Counters are the reset-robust increase from the last scrape at/before the start to the first at/after the end.
    With ``offload=False`` (a GPU-only arm) offload-only quantities that are absent are not listed as missing; they
    are still ``None``. ``tiered=False`` (no secondary tier) does not list the tiering series as missing.
    """
    if end_mono_ns < start_mono_ns:
        problem = f"step span invalid: it ends ({end_mono_ns}) before it starts ({start_mono_ns})"
        return ServerStep(missing=[problem]), HitTokens(source="none", missing=[problem])
    values = step_quantities(series, catalog, start_mono_ns, end_mono_ns)
    scrapes, failed = scrapes_in_step(series, catalog, start_mono_ns, end_mono_ns)

    hit_fields: dict[str, int | None] = {}
    hit_missing: list[str] = []
    for quantity, name in HIT_QUANTITIES.items():
        value = values[quantity]
        hit_fields[name] = None if value.value is None else round(value.value)
        if _listed(value, catalog, offload) and value.missing_text:
            hit_missing.append(value.missing_text)
    any_hits = any(v is not None for v in hit_fields.values())
    hits = HitTokens(**hit_fields, source="server" if any_hits or scrapes else "none", missing=hit_missing)

    server: dict[str, object] = {}
    missing: list[str] = []
    for quantity, name in {**SERVER_COUNTERS, **SERVER_GAUGES}.items():
        server[name] = values[quantity].value
    for quantity, name in SERVER_HISTOGRAMS.items():
        server[name] = server_percentiles(values[quantity].histogram)
    for quantity in (*SERVER_COUNTERS, *SERVER_GAUGES, *SERVER_HISTOGRAMS):
        value = values[quantity]
        if _listed(value, catalog, offload) and value.missing_text:
            missing.append(value.missing_text)
    health = step_tier_health(series, catalog, start_mono_ns, end_mono_ns, values, tiered=offload and tiered)
    server["num_gpu_blocks"], server["gpu_block_size"] = cache_config_blocks(series, start_mono_ns, end_mono_ns)
    step = ServerStep.model_validate({**server, "scrapes": scrapes, "scrape_errors": failed, "missing": missing,
                                      "tier_health": health if offload else TierHealth()})
    return step, hits


def describe_missing(missing: Iterable[str]) -> list[str]:
    """Report lines ``missing: <series looked for> (<quantity>)``, one per unknown quantity, without repeats."""
    seen: dict[str, None] = {}
    for item in missing:
        seen.setdefault(f"missing: {item}", None)
    return list(seen)
