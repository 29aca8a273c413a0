"""The simulator's tier-health series: back-pressure drops when its disk write queue is full, and the CPU gauge
``kv_offload_cpu_cache_usage_perc`` as vLLM means it (chunks pinned by in-flight transfers, not fullness)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.scrape.catalog import load_catalog
from harness.scrape.samples import series_from_bodies, step_server_stats
from harness.sim.cache.cpu import CpuTier
from harness.sim.config import build_engine_config
from harness.sim.metrics_vllm import VllmMetrics
from harness.sim.offload import FS, MAX_WRITE_BACKLOG_S, OffloadManager
from harness.sim.profile import load_profile
from harness.sim.scheduler import EngineCore


def _core(tmp_path: Path) -> EngineCore:
    cfg = build_engine_config(load_profile("demo"), kv_transfer_config=json.dumps({
        "kv_connector": "OffloadingConnector", "kv_role": "kv_both",
        "kv_connector_extra_config": {"spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": 1 << 30,
                                      "secondary_tiers": [{"type": "fs", "root_dir": str(tmp_path)}]}}))
    return EngineCore(cfg)


def test_full_write_queue_drops_cascades_and_the_series_say_so(tmp_path: Path) -> None:
    core = _core(tmp_path)
    off = core.offload
    assert isinstance(off, OffloadManager) and off.disk_write is not None
    metrics = VllmMetrics(core, "m")
    before = metrics.render().decode()
    assert "# TYPE vllm:kv_offload_tiering_backpressure_stores_dropped_total counter" in before
    assert "vllm:kv_offload_tiering_backpressure_stores_dropped_total{" not in before  # no drop yet: no label set
    off._cascade([101, 102], 0.0)  # a cascade the disk takes
    assert off.stats.stores_dropped[FS] == 0
    off.disk_write.free_at = MAX_WRITE_BACKLOG_S + 1.0  # the write queue is that far behind
    off._cascade([103, 104, 105], 0.0)
    assert off.stats.stores_dropped[FS] == 1 and off.stats.blocks_dropped[FS] == 3 * off.k
    after = metrics.render().decode()
    server, _ = step_server_stats(series_from_bodies([(1, "prometheus", before), (2, "prometheus", after)]),
                                  load_catalog("vllm", "0.32.0"), 1, 2)
    th = server.tier_health
    assert th.stores_dropped == 1.0 and th.blocks_dropped == 3.0 * off.k
    assert "tier 1:fs dropped 1 stores" in " ".join(th.problems())


def test_pinned_share_counts_transfers_not_fullness() -> None:
    tier = CpuTier(4)
    for key in (1, 2, 3, 4):
        tier.insert(key, 0.0)
    assert tier.usage == 1.0 and tier.pinned_share(10.0) == 0.0  # full and idle: about 0, as vLLM reports
    tier.pin([1])
    tier.insert_ready(2, 20.0)  # still being written at t=10
    assert tier.pinned_share(10.0) == 0.5
