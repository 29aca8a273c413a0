"""The fit screen's ``cpu-tier-exceeds-gpu-kv`` item: after the run, a vLLM CPU tier no larger than the GPU KV cache
the server reported (``vllm:cache_config_info`` num_gpu_blocks x block_size, scraped into each step's server figures)
is warned with the tier's measured hit share; and the scrape that carries the reported blocks."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from harness.config import load_scenario
from harness.config.scenario import Scenario
from harness.decision.rules.causal import fit_rule
from harness.decision.rules.fit import fit_screen, tier_capacity_items
from harness.schema.summary import ArmSummary, HitTokens, ServerStep, StepSummary
from harness.schema.validation import ArmValidation, ResolvedArm, ResolvedOffload, ValidationRecord
from harness.scrape.catalog import load_catalog
from harness.scrape.samples import cache_config_blocks, series_from_bodies, step_server_stats
from harness.sim.config import build_engine_config
from harness.sim.metrics_vllm import cache_config_labels
from harness.sim.profile import load_profile

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "scenarios" / "demo-sim.yaml"
VLLM_032 = ROOT / "tests" / "fixtures" / "metrics" / "vllm-0.32.0-cpu-metrics.prom"
GIB = 1 << 30
BLOCKS, BLOCK, BPT = 1485, 16, 131072  # demo-sim's simulated server: h200-llama3-8b at 0.145
GPU_KV = BLOCKS * BLOCK * BPT
ITEM = "cpu-tier-exceeds-gpu-kv"
WORKLOAD: dict[str, Any] = {"classes": [{"name": "c", "weight": 1, "prompt_tokens": {"min": 10, "max": 100},
                                         "output_tokens": {"min": 5, "max": 50}}]}
STEPS: dict[str, Any] = {"levels": [{"concurrency": 2, "duration_s": 10}]}


def _scenario(engine: dict[str, Any], *arms: dict[str, Any], base: dict[str, Any] | None = None,
              checks: dict[str, Any] | None = None) -> Scenario:
    data: dict[str, Any] = {"name": "t", "engine": engine, "arms": [base or {"name": "baseline", "tier": "gpu-only"},
                                                                    *arms],
                            "workload": WORKLOAD, "steps": STEPS, "checks": checks or {}}
    return Scenario.model_validate(copy.deepcopy(data))


def _sim(**engine: Any) -> dict[str, Any]:
    return {"kind": "sim", "model": "m", "sim_profile": "h200-llama3-8b", "gpu_memory_utilization": 0.145, **engine}


def _connector(cpu_bytes: int, name: str = "cpu") -> dict[str, Any]:
    return {"name": name, "tier": "cpu", "offload": {"kind": "vllm-connector", "cpu_bytes_to_use": cpu_bytes}}


def _step(blocks: int | None = BLOCKS, *, cpu_hits: int | None = None) -> StepSummary:
    hits = HitTokens() if cpu_hits is None else HitTokens(gpu=5000, cpu=cpu_hits, disk=0, miss=5000 - cpu_hits,
                                                          prompt=10_000)
    return StepSummary(index=0, label="c8", server=ServerStep(num_gpu_blocks=blocks,
                                                              gpu_block_size=BLOCK if blocks else None),
                       hit_tokens=hits)


def _baseline(blocks: int | None = BLOCKS) -> ArmSummary:
    return ArmSummary(name="baseline", tier="gpu-only", decision="baseline", steps=[_step(blocks)])


def _screen(scenario: Scenario, base: ArmSummary | None = None, **kwargs: Any) -> list[Any]:
    items = fit_screen(scenario, base or _baseline(), [], (0.5, 100), 1000.0, **kwargs)
    return [i for i in items if i.name == ITEM]


def _demo(gib: float) -> Scenario:
    scenario = load_scenario(DEMO)
    data = scenario.model_dump()
    data["arms"][1]["offload"]["kv_offloading_size_gib"] = gib
    return Scenario.model_validate(data)


def test_a_1_gib_tier_on_the_demo_is_warned_with_both_sizes_and_its_hit_share() -> None:
    [item] = _screen(_demo(1), tier_steps={"cpu-16g": [_step(cpu_hits=40)]})
    assert item.status == "warn"
    assert item.evidence.startswith(
        "arm cpu-16g (CPU tier as planned): CPU tier 1.0 GiB ≤ GPU KV cache 2.9 GiB (1485 blocks x 16 tokens x "
        "128 KiB/token: the blocks as arm cpu-16g's server reported them (vllm:cache_config_info), the bytes per "
        "token from simulator profile h200-llama3-8b)")
    assert "mirrors what the GPU already holds" in item.evidence and "4x = 11.6 GiB" in item.evidence
    assert item.evidence.endswith("its CPU tier served 0.4% of the arm's prompt tokens (40 of 10000)")


def test_the_shipped_demo_tiers_get_no_item() -> None:
    steps = {"cpu-16g": [_step(cpu_hits=4000)], "cpu-16g-disk": [_step(cpu_hits=4000)]}
    assert _screen(load_scenario(DEMO), tier_steps=steps) == []


def test_boundary_equal_size_warns_one_byte_more_does_not() -> None:
    assert [i.status for i in _screen(_scenario(_sim(), _connector(GPU_KV)))] == ["warn"]
    assert _screen(_scenario(_sim(), _connector(GPU_KV + 1))) == []


def test_without_the_tier_arms_steps_the_baselines_blocks_are_used() -> None:
    [item] = _screen(_scenario(_sim(), _connector(GIB)))
    assert "the blocks as the baseline's server (baseline) reported them" in item.evidence
    assert item.evidence.endswith("the tier's own hits were not given to the screen")


def test_the_tier_arms_own_report_wins_over_the_baselines() -> None:
    small = {"cpu": [_step(blocks=100)]}  # its own server has 100 blocks (200 MiB): the 1 GiB tier is larger
    assert _screen(_scenario(_sim(), _connector(GIB)), tier_steps=small) == []


def test_no_reported_blocks_no_item() -> None:
    assert _screen(_scenario(_sim(), _connector(GIB)), base=_baseline(None)) == []


def _validation(cpu_bytes: int, *, chunk_bytes: int | None = None, tokens: int | None = None) -> ValidationRecord:
    offload = ResolvedOffload(connector="OffloadingConnector", cpu_bytes_to_use=cpu_bytes, chunk_bytes=chunk_bytes,
                              tokens_per_chunk=tokens)
    return ValidationRecord(state="validated", arms=[ArmValidation(arm="cpu", status="ok", message="ok", where="img",
                                                                   resolved=ResolvedArm(offload=offload))])


def test_the_resolved_tier_and_chunk_bytes_win_over_the_plan() -> None:
    scenario = _scenario(_sim(), _connector(16 * GIB))
    [item] = _screen(scenario, validation=_validation(GIB, chunk_bytes=16 * 65536, tokens=16))
    assert "CPU tier as vLLM resolved it (validation.json)" in item.evidence
    assert "x 64 KiB/token" in item.evidence and "from vLLM's resolved offload chunk" in item.evidence
    assert _screen(_scenario(_sim(), _connector(GIB)), validation=_validation(16 * GIB)) == []


def test_trtllm_host_caches_are_not_mirrors_and_get_no_item() -> None:
    scenario = _scenario(_sim(sim_flavor="trtllm"), {"name": "host", "tier": "cpu", "offload": {
        "kind": "trtllm", "host_cache_size": GIB}}, base={"name": "baseline", "tier": "gpu-only",
                                                           "offload": {"kind": "trtllm"}})
    assert _screen(scenario) == []


def test_unknown_bytes_per_token_is_an_unknown_item_not_a_guess() -> None:
    engine = {"kind": "vllm", "image": "vllm/vllm-openai:v0.32.0", "model": "absent/model"}
    [item] = _screen(_scenario(engine, _connector(GIB)))
    assert item.status == "unknown" and "declare checks.kv_bytes_per_token" in item.evidence
    [declared] = _screen(_scenario(engine, _connector(GIB), checks={"kv_bytes_per_token": BPT}))
    assert declared.status == "warn" and "from checks.kv_bytes_per_token" in declared.evidence


def test_it_does_not_decide_on_its_own() -> None:
    items = fit_screen(_demo(1), _baseline(), [], (0.5, 100), 1000.0)
    assert any(i.name == ITEM for i in items)
    assert fit_rule(items).status == "pass"  # a tier serving no hits is held by the causal rule, not here
    assert tier_capacity_items(_demo(1), None) == []  # no baseline, no tier steps: nothing reported


# --- the scrape that carries the reported GPU KV cache -------------------------------------------------------------

def _info_body(labels: dict[str, str]) -> str:
    text = ",".join(f'{k}="{v}"' for k, v in {"engine": "0", "model_name": "m", **labels}.items())
    return f"# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{{{text}}} 1.0\n"


def test_step_server_stats_carry_the_real_vllm_cache_config() -> None:
    text = VLLM_032.read_text(encoding="utf-8")
    server, _hits = step_server_stats(series_from_bodies([(10, "prometheus", text), (20, "prometheus", text)]),
                                      load_catalog("vllm", "0.32.0"), 10, 20)
    assert (server.num_gpu_blocks, server.gpu_block_size) == (16384, 128)


def test_the_simulators_labels_give_its_own_block_count() -> None:
    cfg = build_engine_config(load_profile("h200-llama3-8b"), gpu_memory_utilization=0.145, max_model_len=8192)
    body = _info_body(cache_config_labels(cfg, 1.0))
    series = series_from_bodies([(10, "prometheus", body), (20, "prometheus", body)])
    assert cache_config_blocks(series, 10, 20) == (BLOCKS, BLOCK)
    server, _ = step_server_stats(series, load_catalog("sim", flavor="vllm"), 10, 20)
    [item] = _screen(_demo(1), base=ArmSummary(name="baseline", tier="gpu-only", decision="baseline",
                                               steps=[StepSummary(index=0, label="c8", server=server)]))
    assert item.status == "warn" and "1485 blocks x 16 tokens" in item.evidence


@pytest.mark.parametrize("labels", [{"num_gpu_blocks": "None", "block_size": "16"}, {"block_size": "16"}])
def test_unresolved_or_absent_labels_are_none(labels: dict[str, str]) -> None:
    body = _info_body(labels)
    assert cache_config_blocks(series_from_bodies([(10, "prometheus", body)]), 10, 20) == (None, 16)
    assert cache_config_blocks(series_from_bodies([(10, "prometheus", "up 1\n")]), 10, 20) == (None, None)
