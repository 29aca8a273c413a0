"""Profiles, engine options, and the metric expositions against the golden vLLM 0.32 file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sim_unit_helpers import drive, make_cfg

from harness.sim.config import ConfigError, build_engine_config, parse_kv_transfer_config
from harness.sim.metrics_trtllm import TrtllmMetrics
from harness.sim.metrics_vllm import VllmMetrics
from harness.sim.profile import Profile, ProfileError, builtin_profile_names, load_profile
from harness.sim.scheduler import EngineCore

GOLDEN = Path(__file__).parent / "golden" / "vllm-0.32.0-cpu-metrics.prom"

HARNESS_FAMILIES = [
    "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds", "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds", "vllm:num_requests_running", "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc", "vllm:num_preemptions", "vllm:prefix_cache_queries", "vllm:prefix_cache_hits",
    "vllm:external_prefix_cache_queries", "vllm:external_prefix_cache_hits", "vllm:prompt_tokens_by_source",
    "vllm:prompt_tokens_cached_by_source", "vllm:cache_config_info", "vllm:prompt_tokens",
    "vllm:generation_tokens", "vllm:request_success", "vllm:prompt_tokens_cached",
]


def _families(text: str) -> dict[str, tuple[str, set[str]]]:
    out: dict[str, tuple[str, set[str]]] = {}
    for fam in text_string_to_metric_families(text):
        labels: set[str] = set()
        for sample in fam.samples:
            labels |= set(sample.labels) - {"le"}
        out[fam.name] = (fam.type, labels)
    return out


def test_builtin_profiles_load_and_have_sane_capacity() -> None:
    assert {"demo", "h200-llama3-8b"} <= set(builtin_profile_names())
    h200 = load_profile("h200-llama3-8b")
    assert h200.model.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2 == 131072
    cfg = build_engine_config(h200)
    assert 800_000 < cfg.num_gpu_blocks * cfg.block_size < 1_000_000
    demo = build_engine_config(load_profile("demo"))
    assert 200 <= demo.num_gpu_blocks <= 1000  # "a few hundred GPU blocks"
    p = load_profile("demo")
    recompute_2k = p.compute.step_overhead_s + 2048 * p.compute.prefill_s_per_token
    promote_cpu_2k = 2048 * p.model.kv_bytes_per_token / p.link.h2d_bytes_per_s
    promote_disk_2k = 2048 * p.model.kv_bytes_per_token / p.disk.read_bytes_per_s + promote_cpu_2k
    assert promote_cpu_2k < promote_disk_2k < recompute_2k


def test_profile_errors(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="unknown profile"):
        load_profile("nope")
    bad = tmp_path / "bad.yaml"
    data = load_profile("demo").model_dump()
    data["surprise"] = 1
    bad.write_text(json.dumps(data))
    with pytest.raises(ProfileError, match="surprise"):
        load_profile(path=bad)
    assert isinstance(Profile.model_validate(load_profile("demo").model_dump()), Profile)


def test_engine_config_checks_like_vllm() -> None:
    demo = load_profile("demo")
    with pytest.raises(ConfigError, match="max seq len"):
        build_engine_config(demo, max_model_len=100_000)
    with pytest.raises(ConfigError, match="No available memory"):
        build_engine_config(demo, gpu_memory_utilization=0.5)
    assert build_engine_config(demo, kv_offloading_size_gib=2).offload is not None
    with pytest.raises(ConfigError, match="mutually exclusive"):
        build_engine_config(demo, kv_offloading_size_gib=2, kv_transfer_config="{}")
    trt = build_engine_config(demo, flavor="trtllm", host_cache_size=2**30)
    assert trt.offload is not None and trt.offload.store_mode == "on_evict"


def test_kv_transfer_config_parsing(tmp_path: Path) -> None:
    base = {"kv_connector": "OffloadingConnector", "kv_role": "kv_both"}
    with pytest.raises(ConfigError, match="cpu_bytes_to_use must be specified in kv_connector_extra_config"):
        parse_kv_transfer_config(json.dumps({**base, "kv_connector_extra_config": {}}), 16, None)
    tiered = {**base, "kv_connector_extra_config": {
        "spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": 2**30, "block_size": 64, "eviction_policy": "arc",
        "secondary_tiers": [{"type": "fs", "root_dir": str(tmp_path), "n_read_threads": 8}]}}
    cfg = parse_kv_transfer_config(json.dumps(tiered), 16, 10**9)
    assert cfg.chunk_blocks == 4 and cfg.eviction_policy == "arc"
    assert cfg.fs is not None and cfg.fs.n_read_threads == 8 and cfg.fs.max_bytes == 10**9
    bad_block = {**base, "kv_connector_extra_config": {"cpu_bytes_to_use": 1, "block_size": 24}}
    with pytest.raises(ConfigError, match="multiple"):
        parse_kv_transfer_config(json.dumps(bad_block), 16, None)
    with pytest.raises(ConfigError, match="OffloadingConnector"):
        parse_kv_transfer_config(json.dumps({"kv_connector": "LMCacheConnectorV1"}), 16, None)


def test_vllm_exposition_matches_golden(tmp_path: Path) -> None:
    core = EngineCore(make_cfg(20, cpu_chunks=10, fs_root=tmp_path))
    metrics = VllmMetrics(core, "m")
    for i in range(6):
        core.add(core.new_request(str(i), [i * 100 + j for j in range(40)], 3, i, float(i)))
        drive(core, float(i))
    core.add(core.new_request("again", list(range(40)), 3, 0, 50.0))
    drive(core, 50.0)
    text = metrics.render().decode()
    ours = _families(text)
    golden = _families(GOLDEN.read_text())
    for name in HARNESS_FAMILIES:
        assert name in golden, name
        assert name in ours, name
        assert ours[name][0] == golden[name][0], name
        assert ours[name][1] == golden[name][1], name
    for name in ("vllm:kv_offload_load_bytes", "vllm:kv_offload_store_bytes", "vllm:kv_offload_load_time",
                 "vllm:kv_offload_store_time", "vllm:kv_offload_tiering_read_bytes",
                 "vllm:kv_offload_tiering_write_bytes", "vllm:kv_offload_tiering_chunk_queries",
                 "vllm:kv_offload_tiering_chunk_hits"):
        assert ours[name][0] == "counter", name
    assert ours["vllm:kv_offload_cpu_cache_usage_perc"][0] == "gauge"
    values = {(s.name, tuple(sorted(s.labels.items()))): s.value
              for fam in text_string_to_metric_families(text) for s in fam.samples}

    def get(name: str, **labels: str) -> float:
        return values[(name, tuple(sorted({"engine": "0", "model_name": "m", **labels}.items())))]

    assert get("vllm:prompt_tokens_cached_by_source_total", source="disk") > 0
    assert get("vllm:kv_offload_tiering_read_bytes_total", tier="1:fs") > 0
    total = get("vllm:prompt_tokens_total")
    assert total == sum(get("vllm:prompt_tokens_by_source_total", source=s)
                        for s in ("local_compute", "local_cache_hit", "external_kv_transfer"))


def test_without_offload_no_offload_families() -> None:
    core = EngineCore(make_cfg(20))
    names = _families(VllmMetrics(core, "m").render().decode())
    assert not any(n.startswith("vllm:kv_offload") for n in names)
    assert "vllm:external_prefix_cache_hits" in names


def test_trtllm_json_queue_drains() -> None:
    core = EngineCore(make_cfg(20, cpu_chunks=40, store_mode="on_evict"))
    metrics = TrtllmMetrics(core, "m", stats_collector=False)  # a release without the background collector
    core.add(core.new_request("a", list(range(30)), 3, 0, 0.0))
    now = 0.0
    while core.has_work():
        plan = core.schedule(now)
        assert plan is not None
        core.complete(plan)
        metrics.on_step(plan, core, 1.0)
        now = plan.end
    items = json.loads(metrics.drain_json())
    assert len(items) == 3
    assert {"maxNumBlocks", "freeNumBlocks", "usedNumBlocks", "tokensPerBlock", "allocTotalBlocks",
            "allocNewBlocks", "reusedBlocks", "missedBlocks", "cacheHitRate"} <= set(items[-1]["kvCacheStats"])
    assert json.loads(metrics.drain_json()) == []
    names = _families(metrics.render().decode())
    assert names["trtllm_kv_cache_reused_blocks"][0] == "counter"
    assert names["trtllm_time_to_first_token_seconds"][0] == "histogram"
    assert names["trtllm_kv_cache_hit_rate"][0] == "gauge"


def test_unmodelled_connector_keys_are_reported() -> None:
    text = json.dumps({"kv_connector": "OffloadingConnector", "kv_connector_extra_config": {
        "cpu_bytes_to_use": 2**30, "blocks_per_chunk": 2, "store_threshold": 2, "max_tracker_size": 10}})
    cfg = parse_kv_transfer_config(text, 16, None)
    assert cfg.chunk_blocks == 2 and cfg.store_threshold == 2  # modelled, as vLLM's CPUOffloadingManager
    assert cfg.ignored_keys == ("max_tracker_size",)
