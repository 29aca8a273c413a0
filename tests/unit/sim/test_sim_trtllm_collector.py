"""The simulator's TensorRT-LLM flavour drains JSON /metrics as a release with the background stats collector does,
and the harness, reading Prometheus for such a release, does not starve on it."""

from __future__ import annotations

import json

from sim_unit_helpers import make_cfg

from harness.scrape.catalog import catalog_for_engine, load_catalog
from harness.scrape.samples import describe_missing, step_server_stats
from harness.scrape.series import series_from_bodies
from harness.sim.metrics_trtllm import TrtllmMetrics
from harness.sim.scheduler import EngineCore

SECOND = 1_000_000_000


def _run(core: EngineCore, metrics: TrtllmMetrics, prompts: list[list[int]], now: float = 0.0) -> float:
    for i, prompt in enumerate(prompts):
        core.add(core.new_request(f"r{now}-{i}", prompt, 3, i, now))
    while core.has_work():
        plan = core.schedule(now)
        if plan is None:
            wake = core.next_wakeup()
            assert wake is not None
            now = max(now, wake)
            continue
        core.complete(plan)
        metrics.on_step(plan, core, 1.0)
        now = plan.end
    return now


def _scrapes(with_collector: bool) -> tuple[list[tuple[int, str, str]], EngineCore, tuple[int, int]]:
    """Boundary scrapes of both endpoints around one step with shared prefixes; the step's block counts."""
    core = EngineCore(make_cfg(64, cpu_chunks=40, store_mode="on_evict"))
    metrics = TrtllmMetrics(core, "m", stats_collector=with_collector)
    prefix = list(range(48))
    now = _run(core, metrics, [[*prefix, 100 + i] for i in range(2)])
    bodies = [(1 * SECOND, "trtllm-json", metrics.drain_json().decode()),
              (1 * SECOND, "prometheus", metrics.render().decode())]
    before = (core.stats.reused_blocks, core.stats.missed_blocks)
    _run(core, metrics, [[*prefix, 200 + i] for i in range(3)], now)
    bodies += [(3 * SECOND, "trtllm-json", metrics.drain_json().decode()),
               (3 * SECOND, "prometheus", metrics.render().decode())]
    return bodies, core, (core.stats.reused_blocks - before[0], core.stats.missed_blocks - before[1])


def test_a_json_read_after_the_collector_drained_is_empty() -> None:
    core = EngineCore(make_cfg(20))
    metrics = TrtllmMetrics(core, "m")  # the default: the release with the collector
    _run(core, metrics, [list(range(30))])
    assert json.loads(metrics.drain_json()) == []
    assert metrics.collected == 3, "every iteration went to the collector"
    text = metrics.render().decode()
    assert "trtllm_kv_cache_missed_blocks_total" in text and "trtllm_kv_cache_tokens_per_block" in text
    assert "trtllm_prompt_tokens_total" in text


def test_the_harness_reads_prometheus_and_does_not_starve() -> None:
    bodies, core, (reused, missed) = _scrapes(with_collector=True)
    assert all(body == "[]" for _, fmt, body in bodies if fmt == "trtllm-json"), "the collector took them all"
    catalog = catalog_for_engine("sim", sim_flavor="trtllm")
    assert catalog.name == "trtllm-1.3", "the simulator imitates the newest table entry"
    # what the launch of that release scrapes: Prometheus only
    series = series_from_bodies([b for b in bodies if b[1] == "prometheus"])
    server, hits = step_server_stats(series, catalog, 1 * SECOND, 3 * SECOND)
    bs = core.bs
    assert hits.miss == missed * bs and hits.miss > 0
    assert hits.cached == reused * bs and hits.cached > 0
    assert hits.prompt is not None and hits.prompt > 0
    assert server.kv_usage_max is not None and server.running_max is not None
    assert not hits.missing or all("hit_tokens.gpu" in m or "hit_tokens.cpu" in m or "hit_tokens.disk" in m
                                   for m in hits.missing)


def test_reading_json_on_such_a_release_would_have_starved() -> None:
    bodies, _core, _ = _scrapes(with_collector=True)
    series = series_from_bodies(bodies)
    _server, hits = step_server_stats(series, load_catalog("trtllm", "1.1.0"), 1 * SECOND, 3 * SECOND)
    assert hits.miss is None, "only JSON has recomputed tokens in the 1.1 catalog, and the collector drained it"
    assert any("recomputed_tokens" in line for line in describe_missing(hits.missing))


def test_without_the_collector_json_still_carries_the_stats() -> None:
    bodies, core, (_reused, missed) = _scrapes(with_collector=False)
    assert any(body != "[]" for _, fmt, body in bodies if fmt == "trtllm-json")
    series = series_from_bodies(bodies)
    _server, hits = step_server_stats(series, load_catalog("trtllm", "1.1.0"), 1 * SECOND, 3 * SECOND)
    assert hits.miss == missed * core.bs


def test_a_build_without_the_prometheus_block_counters_says_why() -> None:
    text = ("# TYPE trtllm_kv_cache_utilization gauge\ntrtllm_kv_cache_utilization{model_name=\"m\"} 0.5\n")
    series = series_from_bodies([(0, "prometheus", text), (SECOND, "prometheus", text)])
    _server, hits = step_server_stats(series, load_catalog("trtllm", "1.3.0"), 0, SECOND)
    assert hits.miss is None
    [line] = [m for m in describe_missing(hits.missing) if "(recomputed_tokens" in m]
    assert "trtllm_kv_cache_missed_blocks_total x trtllm_kv_cache_tokens_per_block" in line
    assert "not available from this release: JSON /metrics (kvCacheStats) is not polled" in line
    assert "PR #11243" in line
