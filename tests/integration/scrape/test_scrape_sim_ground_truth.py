"""Done-when: against the simulator with offload tiers, per-step hit tokens by source from scraped metrics equal the
simulator's own ground truth (its per-request record of where every prompt token came from)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from harness.engines.spec import MetricsEndpoint
from harness.scrape.catalog import load_catalog
from harness.scrape.samples import load_scrapes, step_server_stats
from harness.scrape.scraper import Scraper
from tests.support import sim as testing

groundtruth = pytest.importorskip("harness.sim.groundtruth")

FAMILY_TOKENS = 1500  # ~94 blocks of 16 in the demo profile (558 GPU blocks)
FAST = 0.02


def _ask(client: httpx.Client, family: int, variant: int) -> None:
    shared = " ".join(f"fam{family}w{i}" for i in range(FAMILY_TOKENS))
    resp = client.post("/v1/completions", json={"model": "sim-model", "prompt": f"{shared} question{variant}",
                                                "max_tokens": 2})
    assert resp.status_code == 200, resp.text


def _run_steps(sim: Any, out: Path, families: int, rounds: int,
               endpoints: list[MetricsEndpoint]) -> list[tuple[int, int]]:
    """Each round is one step: every family once, sequentially, with boundary scrapes and polls in between."""
    spans = []
    scraper = Scraper(sim.base_url, endpoints, out, 0.05)
    scraper.start()
    try:
        with httpx.Client(base_url=sim.base_url, timeout=60) as client:
            for step in range(rounds):
                scraper.scrape_now(f"step-{step}-start")
                start = time.perf_counter_ns()
                for family in range(families):
                    _ask(client, family, step)
                end = time.perf_counter_ns()
                scraper.scrape_now(f"step-{step}-end")
                spans.append((start, end))
    finally:
        scraper.stop()
    assert scraper.errors == 0
    return spans


def _truth(sim: Any, start: int, end: int) -> dict[str, int]:
    records = [r for r in groundtruth.read_ground_truth(sim.ground_truth_path) if start <= r["arrival_ns"] <= end]
    return {key: sum(int(r[f"{key}_tokens"]) for r in records) for key in ("gpu_hit", "cpu_hit", "disk_hit",
                                                                            "recomputed", "prompt")} | \
        {"requests": len(records)}


def test_cpu_tier_per_step_hits_equal_ground_truth(tmp_path: Path) -> None:
    # 8 families x 1500 tokens overflow the GPU cache and fit GPU + CPU: later rounds promote from the CPU tier
    with testing.running_sim(in_process=True, profile="demo", time_scale=FAST, kv_offloading_size=8) as sim:
        spans = _run_steps(sim, tmp_path, families=8, rounds=3,
                           endpoints=[MetricsEndpoint(path="/metrics", format="prometheus")])
        truths = [_truth(sim, s, e) for s, e in spans]
    series = load_scrapes(tmp_path)
    catalog = load_catalog("sim", None, flavor="vllm")
    cpu_total = 0
    for (start, end), truth in zip(spans, truths, strict=True):
        assert truth["requests"] == 8
        server, hits = step_server_stats(series, catalog, start, end)
        assert hits.missing == []
        assert (hits.gpu, hits.cpu, hits.disk, hits.miss, hits.prompt) == (
            truth["gpu_hit"], truth["cpu_hit"], truth["disk_hit"], truth["recomputed"], truth["prompt"])
        assert server.offload_store_bytes is not None and server.ttft_ms is not None
        assert server.ttft_ms.count == 8
        cpu_total += hits.cpu or 0
    assert cpu_total > 0, "the workload must exercise CPU promotions for this test to mean anything"


def test_disk_tier_per_step_hits_equal_ground_truth(tmp_path: Path) -> None:
    cfg = json.dumps({"kv_connector": "OffloadingConnector", "kv_role": "kv_both", "kv_connector_extra_config": {
        "spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": 2**30, "eviction_policy": "lru",
        "secondary_tiers": [{"type": "fs", "root_dir": str(tmp_path / "tier"), "n_read_threads": 4}]}})
    with testing.running_sim(in_process=True, profile="demo", time_scale=FAST, kv_transfer_config=cfg) as sim:
        spans = _run_steps(sim, tmp_path / "metrics", families=12, rounds=2,
                           endpoints=[MetricsEndpoint(path="/metrics", format="prometheus")])
        truths = [_truth(sim, s, e) for s, e in spans]
    series = load_scrapes(tmp_path / "metrics")
    catalog = load_catalog("sim", None)
    disk_total = 0
    for (start, end), truth in zip(spans, truths, strict=True):
        server, hits = step_server_stats(series, catalog, start, end)
        assert (hits.gpu, hits.cpu, hits.disk, hits.miss) == (
            truth["gpu_hit"], truth["cpu_hit"], truth["disk_hit"], truth["recomputed"])
        assert server.disk_write_bytes is not None
        disk_total += hits.disk or 0
    assert disk_total > 0


def test_trtllm_flavor_total_hits_equal_ground_truth(tmp_path: Path) -> None:
    endpoints = [MetricsEndpoint(path="/metrics", format="trtllm-json"),
                 MetricsEndpoint(path="/prometheus/metrics", format="prometheus")]
    with testing.running_sim(in_process=True, profile="demo", time_scale=FAST, flavor="trtllm",
                             host_cache_size=8 * 2**30) as sim:
        spans = _run_steps(sim, tmp_path, families=8, rounds=2, endpoints=endpoints)
        truths = [_truth(sim, s, e) for s, e in spans]
    series = load_scrapes(tmp_path)
    catalog = load_catalog("sim", None, flavor="trtllm")
    for (start, end), truth in zip(spans, truths, strict=True):
        server, hits = step_server_stats(series, catalog, start, end)
        assert hits.cached == truth["gpu_hit"] + truth["cpu_hit"] + truth["disk_hit"]
        assert hits.gpu is None and hits.cpu is None  # TensorRT-LLM does not split hits by tier
        assert hits.miss is not None and hits.miss >= truth["recomputed"]  # whole missed blocks
        assert server.kv_usage_max is not None
