"""Every scenario field works or is refused at load: a budget judged at a percentile no window computes, settings
of another drill kind, simulator flags on a real engine, container settings without a container, think time on
open-loop arrivals, a measure no interval can be put on, trace settings the trace ignores, reuse structures no
class draws from, master settings without a master. Each is refused naming the field; what works loads as before."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_scenarios import load_with, refused

from harness.config import load_scenario_text
from harness.config.rules import BudgetRule

ROOT = Path(__file__).resolve().parents[3]


# --- budget percentile ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("pct", [50, 95, 99, 95.0])
def test_a_budget_at_a_computed_percentile_loads(pct: float) -> None:
    rule = BudgetRule(metric="ttft", percentile=pct, budget_ms=1000)
    assert rule.label == f"ttft-p{float(pct):g}-budget" and rule.percentile == float(pct)


@pytest.mark.parametrize("pct", [97.3, 100, 90, 0])
def test_a_budget_at_a_percentile_no_window_computes_is_refused_naming_the_field(pct: float) -> None:
    refused("rules.budgets[0].percentile: use 50, 95 or 99",
             rules={"budgets": [{"metric": "ttft", "percentile": pct, "budget_ms": 1000}]})


def test_a_p95_budget_needs_its_own_budget_not_the_p99_slo() -> None:
    refused("rules.budgets[0]: a p95 budget needs its own budget_ms", rules={"budgets": [{"metric": "ttft",
                                                                                         "percentile": 95}]})
    assert load_with(rules={"budgets": [{"metric": "ttft"}]}).rules.budgets[0].budget_ms is None  # p99: the SLO's


# --- drills ----------------------------------------------------------------------------------------------------------

def test_drill_settings_of_another_kind_are_refused() -> None:
    refused("drills[0]: burst_requests applies to promotion_burst drills only, not cache_loss",
             drills=[{"kind": "cache_loss", "burst_requests": 64}])
    refused("drills[0]: fill_gib applies to storage_pressure drills only, not restart",
             drills=[{"kind": "restart", "fill_gib": 1}])
    refused("a storage_pressure drill needs fill_gib", drills=[{"kind": "storage_pressure"}])
    drills = load_with(drills=[{"kind": "promotion_burst", "burst_requests": 64},
                           {"kind": "storage_pressure", "read_slowdown": 4},
                           {"kind": "cache_loss", "burst_requests": 32}]).drills  # a recorded default: fine
    assert [d.kind for d in drills] == ["promotion_burst", "storage_pressure", "cache_loss"]


# --- engine ----------------------------------------------------------------------------------------------------------

def test_simulator_flags_on_a_real_engine_are_refused() -> None:
    real = {"kind": "vllm", "model": "m", "launcher": "process"}
    refused("engine: sim_profile, sim_time_scale apply to the simulator (engine.kind: sim) only, not vllm",
             engine={**real, "sim_profile": "h200", "sim_time_scale": 4})
    refused("sim_noise applies to the simulator", engine={**real, "sim_noise": {"seed": 3}})
    assert load_with(engine={**real, "sim_profile": "demo"}).engine.kind == "vllm"  # the default, as recorded


def test_container_settings_without_a_container_are_refused() -> None:
    refused("engine: gpus applies to containers (engine.launcher: docker) only, not process",
             engine={"gpus": "0,1"})
    refused("CUDA_VISIBLE_DEVICES", engine={"gpus": "1"})
    refused("shm_size, ipc apply to containers", engine={"shm_size": "16g", "ipc": "host"})
    docker = load_with(engine={"launcher": "docker", "image": "kvoffload-harness-sim:0.1.0", "gpus": "0,1",
                           "shm_size": "16g"}).engine
    assert (docker.gpus, docker.shm_size) == ("0,1", "16g")


def test_a_shm_size_the_container_does_not_get_is_refused() -> None:
    refused("shm_size does nothing when the container shares the host's /dev/shm (engine.ipc: host)",
             engine={"launcher": "docker", "image": "kvoffload-harness-sim:0.1.0", "shm_size": "16g",
                     "ipc": "host"})
    trt = {"kind": "trtllm", "model": "m", "launcher": "docker", "image": "nvcr.io/nvidia/tensorrt-llm/release:1.0.0"}
    refused("TensorRT-LLM containers run with ipc host", engine={**trt, "shm_size": "16g"},
             arms=[{"name": "baseline", "tier": "gpu-only"}])
    assert load_with(engine={**trt, "shm_size": "16g", "ipc": "private"},
                 arms=[{"name": "baseline", "tier": "gpu-only"}]).engine.shm_size == "16g"


def test_arm_engine_overrides_still_merge() -> None:
    scenario = load_with(arms=[{"name": "baseline", "tier": "gpu-only"},
                           {"name": "b2", "tier": "gpu-only", "engine": {"max_num_seqs": 8}}])
    assert scenario.engine_for(scenario.arms[1]).max_num_seqs == 8


# --- steps -----------------------------------------------------------------------------------------------------------

def test_think_time_on_open_loop_arrivals_is_refused() -> None:
    refused("steps.levels[0]: think_time_s applies to closed-loop levels (concurrency) only",
             steps={"levels": [{"rate_rps": 2, "duration_s": 20, "think_time_s": 1}]})
    refused("search.think_time_s applies to a closed-loop search",
             steps={"levels": [{"rate_rps": 2, "duration_s": 20}],
                    "search": {"budget_ms": 500, "low": 1, "high": 8, "think_time_s": 1}})
    level = load_with(steps={"levels": [{"concurrency": 2, "duration_s": 20, "think_time_s": 1}]}).steps.levels[0]
    assert level.think_time_s == 1


# --- rules -----------------------------------------------------------------------------------------------------------

def test_a_measure_no_interval_can_be_put_on_is_refused() -> None:
    refused("rules.earns_keep.measures: hit_rate: the hit rate comes from server counters",
             rules={"earns_keep": {"measures": ["ttft_p95", "hit_rate"]}})
    refused("rules.noise_floor.measures: hit_rate", rules={"noise_floor": {"measures": ["hit_rate"]}})
    assert load_with(rules={"earns_keep": {"measures": ["goodput"]}}).rules.earns_keep is not None


# --- workload --------------------------------------------------------------------------------------------------------

TRACE = {"path": "t.jsonl"}


def test_trace_settings_the_trace_ignores_are_refused() -> None:
    refused("workload.trace: speed scales the timestamps",
             workload={"classes": [], "trace": {**TRACE, "mode": "closed_loop", "speed": 2}})
    refused("workload.classes and workload.reuse are not used with workload.trace", workload={"trace": TRACE})
    refused("are not used with workload.trace",
             workload={"classes": [], "trace": TRACE, "reuse": {"unique_fraction": 0.5}})
    assert load_with(workload={"classes": [], "trace": {**TRACE, "speed": 2}}).workload.trace is not None


def test_reuse_structures_no_class_draws_from_are_refused() -> None:
    classes = [{"name": "c", "weight": 1, "reuse": "system_prompt", "prompt_tokens": {"min": 100, "max": 200},
                "output_tokens": {"min": 4, "max": 8}}]
    refused("workload.reuse.documents is configured but no request class draws from it (reuse: any or document)",
             workload={"classes": classes, "reuse": {"documents": {"count": 4}}})
    refused("workload.reuse.sessions is configured but no request class draws from it (reuse: session)",
             workload={"classes": [{**classes[0], "reuse": "any"}], "reuse": {"sessions": {"turns": 2}}})
    refused("workload.reuse.system_prompts is configured",
             workload={"classes": [{**classes[0], "reuse": "unique"}], "reuse": {"system_prompts": {"tokens": 64}}})
    session = load_with(workload={"classes": [{**classes[0], "reuse": "session"}],
                              "reuse": {"system_prompts": {"tokens": 64}, "sessions": {"turns": 2}}})
    assert session.workload.reuse.system_prompts is not None  # a session opens with a system prompt


# --- load ------------------------------------------------------------------------------------------------------------

def test_master_settings_without_a_master_are_refused() -> None:
    refused("load: master_port configures the locust master", load={"master_port": 5557})
    refused("master_bind_host, worker_wait_s configure", load={"master_bind_host": "0.0.0.0", "worker_wait_s": 5})
    assert load_with(load={"processes": 2, "master_port": 5557}).load.master_port == 5557


# --- what works today ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", sorted((ROOT / "scenarios").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_scenario_loads(path: Path) -> None:
    assert load_scenario_text(path.read_text(), str(path)).name


def test_the_recorded_scenario_of_a_run_loads() -> None:
    path = ROOT / "tests" / "fixtures" / "runs" / "demo-prelayout" / "scenario.yaml"
    scenario = load_scenario_text(path.read_text(), str(path))
    assert [b.percentile for b in scenario.rules.budgets] == [99.0, 99.0] and scenario.drills
