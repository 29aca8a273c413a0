"""Tier health per step from vLLM 0.32's tier-health series (fixture built from the 0.32.0 source names)."""

from __future__ import annotations

from scrape_helpers import FIXTURES, vllm_text

from harness.schema.summary import ServerStep
from harness.scrape.catalog import load_catalog
from harness.scrape.samples import series_from_bodies, step_server_stats
from harness.scrape.tier_health import declared_families

VLLM = load_catalog("vllm", "0.32.0")
START = (FIXTURES / "vllm-0.32.0-tier-health-start.prom").read_text(encoding="utf-8")
END = (FIXTURES / "vllm-0.32.0-tier-health-end.prom").read_text(encoding="utf-8")


def _step(start: str = START, end: str = END, **kw: bool) -> ServerStep:
    server, _hits = step_server_stats(series_from_bodies([(10, "prometheus", start), (20, "prometheus", end)]), VLLM,
                                      10, 20, **kw)
    return server


def test_fixture_gives_per_step_counter_deltas_and_per_tier_split() -> None:
    th = _step().tier_health
    assert (th.stores_dropped, th.blocks_dropped) == (5.0, 40.0)  # label set bound during the step: from 0
    assert th.promotion_failures == 2.0 and th.promotion_allocation_failures == 2.0
    assert th.allocation_failures == 3.0
    fs = next(t for t in th.tiers if t.tier == "1:fs")
    assert (fs.stores_dropped, fs.chunk_queries, fs.chunk_hits, fs.chunk_hit_rate) == (5.0, 800.0, 400.0, 0.5)
    primary = next(t for t in th.tiers if t.tier == "0:primary")
    assert primary.chunk_hit_rate == 0.5 and primary.stores_dropped == 0.0  # declared family, no drop on this tier
    assert th.lookup_sync_delay is not None and th.lookup_sync_delay.count == 200
    assert th.lookup_sync_delay.p99_ms is not None and 1.0 <= th.lookup_sync_delay.p99_ms <= 5.0
    assert th.missing == []


def test_declared_family_without_samples_reads_zero_not_missing() -> None:
    th = _step().tier_health
    assert th.cascade_failures == 0.0  # "# TYPE ..._total counter" and no sample: no event since start-up
    assert th.lookup_async_delay is not None and th.lookup_async_delay.count == 0
    assert declared_families(END, {"vllm:kv_offload_tiering_cascade_job_failures"}) == {
        "vllm:kv_offload_tiering_cascade_job_failures"}


def test_absent_series_are_none_and_named_never_zero() -> None:
    plain = vllm_text(device=1)
    th = _step(plain, plain).tier_health
    assert th.stores_dropped is None and th.promotion_failures is None and th.allocation_failures is None
    assert th.tiers == []
    assert any("backpressure_stores_dropped" in m for m in th.missing)
    assert any("kv_offload_lookup_sync_delay_seconds" in m for m in th.missing)


def test_cpu_only_arm_does_not_list_tiering_series_and_gpu_only_lists_nothing() -> None:
    plain = vllm_text(device=1)
    cpu = _step(plain, plain, tiered=False).tier_health
    assert not any("(tier." in m for m in cpu.missing)
    assert any("kv_offload_allocation_failure" in m for m in cpu.missing)
    assert _step(plain, plain, offload=False).tier_health.missing == []


def test_problems_name_the_tier() -> None:
    problems = _step().tier_health.problems()
    assert "tier 1:fs dropped 5 stores (40 blocks) under back-pressure" in problems
    assert "tier 1:fs failed 2 promotion jobs" in problems


def test_cpu_cache_usage_perc_is_the_pinned_share_not_fullness() -> None:
    server = _step()
    assert server.cpu_tier_pinned_max == 0.125
    assert server.cpu_tier_fill_max is None  # vLLM 0.32 has no fullness gauge ...
    assert not any("cpu_tier_usage" in m for m in server.missing)  # ... and that is not news
    assert "pinned" in (VLLM.sources("cpu_tier_pinned")[0].note or "")
    old = ServerStep.model_validate({"cpu_tier_usage_max": 0.5})  # summaries written before the rename
    assert old.cpu_tier_pinned_max == 0.5 and "cpu_tier_usage_max" not in old.model_dump()
