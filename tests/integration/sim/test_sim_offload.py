"""Offload tiers over real sockets: CPU tier vs GPU only, the fs tier (cache loss, restart), trtllm flavour."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from harness.sim.groundtruth import read_ground_truth
from tests.support.sim import SimHandle, running_sim

FAMILY_TOKENS = 1500  # 94 blocks of 16 in the demo profile (558 GPU blocks)
FAST = 0.02  # time scale: 50x faster than modelled


def _prompt(family: int, variant: int = 0) -> str:
    shared = " ".join(f"fam{family}w{i}" for i in range(FAMILY_TOKENS))
    return f"{shared} question{variant}"


def _ask(client: httpx.Client, family: int, variant: int = 0) -> dict[str, object]:
    resp = client.post("/v1/completions", json={"model": "sim-model", "prompt": _prompt(family, variant),
                                                "max_tokens": 1})
    assert resp.status_code == 200, resp.text
    body: dict[str, object] = resp.json()
    return body


def _metrics(base_url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(base_url + "/metrics", timeout=10).text
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            labels = tuple(sorted((k, v) for k, v in s.labels.items() if k not in ("engine", "model_name")))
            out[(s.name, labels)] = float(s.value)
    return out


def _rounds(sim: SimHandle, families: int, rounds: int = 2) -> None:
    with httpx.Client(base_url=sim.base_url, timeout=60) as client:
        for rnd in range(rounds):
            for fam in range(families):
                _ask(client, fam, rnd)


def test_cpu_tier_serves_overflow_and_gpu_only_recomputes() -> None:
    # 8 families x 1500 tokens = 12k tokens: more than the GPU (8,928) and less than GPU + CPU (8 GiB = 26k)
    with running_sim(in_process=True, profile="demo", time_scale=FAST, kv_offloading_size=8) as sim:
        _rounds(sim, 8)
        m = _metrics(sim.base_url)
        host = m[("vllm:prompt_tokens_cached_by_source_total", (("source", "host"),))]
        assert host > 0
        assert m[("vllm:kv_offload_store_bytes_total", ())] > 0
        assert m[("vllm:kv_offload_load_bytes_total", ())] > 0
        assert m[("vllm:external_prefix_cache_hits_total", ())] == host
        assert sim.ground_truth_path is not None
        records = read_ground_truth(sim.ground_truth_path)
        assert sum(r["cpu_hit_tokens"] for r in records) == host
        compute_with_tier = m[("vllm:prompt_tokens_by_source_total", (("source", "local_compute"),))]

    with running_sim(in_process=True, profile="demo", time_scale=FAST) as sim:
        _rounds(sim, 8)
        m = _metrics(sim.base_url)
        assert m[("vllm:prompt_tokens_cached_by_source_total", (("source", "host"),))] == 0
        assert not any(name.startswith("vllm:kv_offload") for name, _labels in m)
        compute_gpu_only = m[("vllm:prompt_tokens_by_source_total", (("source", "local_compute"),))]
    assert compute_gpu_only > compute_with_tier


def _tiering_config(root: Path) -> str:
    return json.dumps({
        "kv_connector": "OffloadingConnector", "kv_role": "kv_both",
        "kv_connector_extra_config": {
            "spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": 2**30, "eviction_policy": "lru",
            "secondary_tiers": [{"type": "fs", "root_dir": str(root), "n_read_threads": 16}],
        },
    })


def test_disk_tier_hits_restart_and_cache_loss(tmp_path: Path) -> None:
    root = tmp_path / "kvtier"
    cfg = _tiering_config(root)
    # 12 families x 94 blocks overflow GPU (558 blocks) + CPU (1 GiB = 204 blocks): cascades to disk
    with running_sim(in_process=True, profile="demo", time_scale=FAST, kv_transfer_config=cfg) as sim:
        _rounds(sim, 12)
        m = _metrics(sim.base_url)
        assert m[("vllm:prompt_tokens_cached_by_source_total", (("source", "disk"),))] > 0
        assert m[("vllm:kv_offload_tiering_write_bytes_total", (("tier", "1:fs"),))] > 0
        assert m[("vllm:kv_offload_tiering_read_bytes_total", (("tier", "1:fs"),))] > 0
        assert m[("vllm:kv_offload_tiering_chunk_hits_total", (("tier", "1:fs"),))] > 0
        state = httpx.get(sim.base_url + "/admin/state").json()
        assert state["disk"]["files"] > 0
    assert any(root.rglob("chunks.kvseg"))  # one segment per namespace

    # a restart with the same root_dir starts warm: the first request hits the disk
    with running_sim(in_process=True, profile="demo", time_scale=FAST, kv_transfer_config=cfg) as sim, \
            httpx.Client(base_url=sim.base_url, timeout=60) as client:
        body = _ask(client, 0, 5)
        usage = body["usage"]
        assert isinstance(usage, dict) and usage["prompt_tokens_details"]["cached_tokens"] > 0
        m = _metrics(sim.base_url)
        assert m[("vllm:prompt_tokens_cached_by_source_total", (("source", "disk"),))] > 0

        # deleting the directory is real cache loss: misses, no errors
        shutil.rmtree(root)
        body = _ask(client, 1, 5)
        usage = body["usage"]
        assert isinstance(usage, dict) and usage["prompt_tokens_details"]["cached_tokens"] == 0
        m2 = _metrics(sim.base_url)
        assert m2[("vllm:prompt_tokens_cached_by_source_total", (("source", "disk"),))] == \
            m[("vllm:prompt_tokens_cached_by_source_total", (("source", "disk"),))]
        _rounds(sim, 3, rounds=1)  # the tier keeps working after the loss
        assert httpx.post(sim.base_url + "/admin/cache-loss").json()["disk_tier"] is True


def test_trtllm_flavor_metrics() -> None:
    with running_sim(in_process=True, profile="demo", time_scale=FAST, flavor="trtllm",
                     host_cache_size=8 * 2**30) as sim:
        _rounds(sim, 8)
        # the simulated background stats collector (a release with TensorRT-LLM PR #11243) drains the iteration
        # stats before a JSON /metrics poll can: it reads [] (the queue itself: tests/unit/sim)
        assert httpx.get(sim.base_url + "/metrics").json() == []
        text = httpx.get(sim.base_url + "/prometheus/metrics").text
        samples = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
        assert samples["trtllm_kv_cache_tokens_per_block"] == 16
        assert samples["trtllm_kv_cache_missed_blocks_total"] > 0
        assert samples["trtllm_kv_cache_onboard_bytes_total"] > 0
        assert samples["trtllm_kv_cache_offload_bytes_total"] > 0
        assert samples["trtllm_kv_cache_reused_blocks_total"] > 0
