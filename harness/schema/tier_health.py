"""Tier-health figures for one step (``summary.json``: ``steps[].server.tier_health``).

vLLM's offload connector counts what its tiers failed to do: stores dropped under back-pressure (the disk tier
silently not writing), promotion and cascade jobs that failed, allocations that failed, and per-tier chunk lookups and
hits; it also times lookups. Every figure is the counter's increase over the step, ``None`` when the series was not
there (named in ``missing``), never 0 for "unknown". A counter family the server declared (``# TYPE`` line) but has
no sample for yet reads 0: vLLM binds a label set at its first event, so a declared, empty family means none happened.

This module holds only the data model (no imports from the rest of the harness), so ``harness.schema.summary`` can
nest it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TierFigures(_Model):
    """One tier (vLLM's ``tier`` label, e.g. ``0:primary`` = CPU, ``1:fs`` = disk) over one step."""

    tier: str
    stores_dropped: float | None = None  # kv_offload_tiering_backpressure_stores_dropped
    blocks_dropped: float | None = None  # kv_offload_tiering_backpressure_blocks_dropped
    promotion_failures: float | None = None  # kv_offload_tiering_promotion_job_failures
    cascade_failures: float | None = None  # kv_offload_tiering_cascade_job_failures
    chunk_queries: float | None = None  # kv_offload_tiering_chunk_queries
    chunk_hits: float | None = None  # kv_offload_tiering_chunk_hits
    chunk_hit_rate: float | None = None  # hits / queries (None without queries)


class LookupDelay(_Model):
    """A lookup-delay histogram's increase over the step, in milliseconds."""

    count: int = 0
    p50_ms: float | None = None
    p99_ms: float | None = None
    mean_ms: float | None = None


class TierHealth(_Model):
    """Tier health over one step: totals over tiers, the per-tier split, lookup delays, and what was missing."""

    stores_dropped: float | None = None
    blocks_dropped: float | None = None
    promotion_failures: float | None = None
    cascade_failures: float | None = None
    promotion_allocation_failures: float | None = None  # kv_offload_tiering_promotion_allocation_failures
    allocation_failures: float | None = None  # kv_offload_allocation_failure (store allocations, any spec)
    tiers: list[TierFigures] = Field(default_factory=list)
    lookup_sync_delay: LookupDelay | None = None  # kv_offload_lookup_sync_delay_seconds
    lookup_async_delay: LookupDelay | None = None  # kv_offload_lookup_async_delay_seconds
    missing: list[str] = Field(default_factory=list)  # series looked for and not found

    def recorded(self) -> bool:
        """Whether this step has any tier-health figure or missing-series note (older summaries have neither)."""
        figures = (self.stores_dropped, self.blocks_dropped, self.promotion_failures, self.cascade_failures,
                   self.promotion_allocation_failures, self.allocation_failures, self.lookup_sync_delay,
                   self.lookup_async_delay)
        return bool(self.tiers or self.missing) or any(v is not None for v in figures)

    def problems(self) -> list[str]:
        """Human lines naming each tier that dropped stores or failed jobs in this step (empty when healthy)."""
        lines: list[str] = []
        for t in self.tiers:
            if t.stores_dropped:
                blocks = f" ({t.blocks_dropped:.0f} blocks)" if t.blocks_dropped else ""
                lines.append(f"tier {t.tier} dropped {t.stores_dropped:.0f} stores{blocks} under back-pressure")
            if t.promotion_failures:
                lines.append(f"tier {t.tier} failed {t.promotion_failures:.0f} promotion jobs")
            if t.cascade_failures:
                lines.append(f"tier {t.tier} failed {t.cascade_failures:.0f} cascade jobs (stores into it)")
        if not self.tiers:
            for value, text in ((self.stores_dropped, "stores dropped under back-pressure"),
                                (self.promotion_failures, "promotion jobs failed"),
                                (self.cascade_failures, "cascade jobs failed")):
                if value:
                    lines.append(f"{value:.0f} {text}")
        if self.promotion_allocation_failures:
            lines.append(f"{self.promotion_allocation_failures:.0f} promotions could not allocate CPU-tier space")
        if self.allocation_failures:
            lines.append(f"CPU tier: {self.allocation_failures:.0f} store allocations failed (stores not kept)")
        return lines
