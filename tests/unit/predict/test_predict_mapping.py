"""The mapping of a user's scenario onto the simulator (harness/predict/mapping.py, engine_map.py): what is kept as
written, what is replaced, where the fs tiers go, and the engine field table covering every EngineSpec field."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config import load_scenario
from harness.config.arms import TrtllmKvCache, VllmConnectorOffload, VllmNativeOffload
from harness.config.engine import EngineSpec
from harness.config.scenario import Scenario
from harness.predict import engine_map
from harness.predict.mapping import Clock, Mapped, PredictTarget, map_scenario
from harness.predict.run import mapped_yaml
from harness.sim.profile import load_profile

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = ROOT / "scenarios"


def _map(name: str, tmp_path: Path, profile: str = "h100-llama3-8b",
         clock: Clock = "virtual") -> tuple[Scenario, Mapped]:
    source = load_scenario(SCENARIOS / f"{name}.yaml", [])
    target = PredictTarget(profile=load_profile(profile), profile_name=profile, clock=clock,
                           tier_root=tmp_path / "tiers")
    return source, map_scenario(source, target)


def test_vllm_tiered_becomes_a_sim_scenario_with_everything_else_kept(tmp_path: Path) -> None:
    source, mapped = _map("vllm-tiered", tmp_path)
    got = mapped.scenario
    eng = got.engine
    assert (eng.kind, eng.sim_flavor, eng.sim_profile, eng.sim_clock, eng.effective_launcher) == (
        "sim", "vllm", "h100-llama3-8b", "virtual", "process")
    assert eng.image is None and eng.model_cache_dir is None and eng.port == 0
    for name in ("model", "served_model_name", "gpu_memory_utilization", "max_model_len", "max_num_seqs",
                 "max_num_batched_tokens", "enable_prefix_caching"):
        assert getattr(eng, name) == getattr(source.engine, name), name
    assert got.workload == source.workload and got.steps == source.steps and got.rules == source.rules
    assert got.slo == source.slo and got.drills == source.drills and got.checks == source.checks
    assert [a.name for a in got.arms] == [a.name for a in source.arms]
    cpu = got.arms[1].offload
    assert isinstance(cpu, VllmConnectorOffload) and cpu == source.arms[1].offload
    tiered, before = got.arms[2].offload, source.arms[2].offload
    assert isinstance(tiered, VllmConnectorOffload) and isinstance(before, VllmConnectorOffload)
    assert tiered.cpu_bytes_to_use == before.cpu_bytes_to_use == 34359738368
    (tier,) = tiered.secondary_tiers
    assert tier.root_dir == str(tmp_path / "tiers" / "cpu-32g-nvme-fs0") != before.secondary_tiers[0].root_dir
    assert tier.model_dump(exclude={"root_dir"}) == before.secondary_tiers[0].model_dump(exclude={"root_dir"})
    assert got.name == "vllm-tiered-predicted"
    assert any("/mnt/nvme/kv-tier ->" in c for c in mapped.changes)
    assert any(c.startswith("engine.kind: vllm -> sim") for c in mapped.changes)
    assert not mapped.warnings  # the profile's model is the scenario's


def test_the_mapped_yaml_loads_back_to_the_same_scenario(tmp_path: Path) -> None:
    _source, mapped = _map("vllm-tiered", tmp_path)
    path = tmp_path / "mapped.yaml"
    path.write_text(mapped_yaml(mapped), encoding="utf-8")
    assert load_scenario(path, []).model_dump() == mapped.scenario.model_dump()


def test_native_offload_size_is_kept_and_env_is_not_passed(tmp_path: Path) -> None:
    source, mapped = _map("vllm-cpu-pilot", tmp_path)
    off = mapped.scenario.arms[1].offload
    assert isinstance(off, VllmNativeOffload) and off.kv_offloading_size_gib == 16
    assert mapped.scenario.engine.env == {} and source.engine.env
    assert any(c.startswith("engine.env: not passed") and "HF_TOKEN" in c for c in mapped.changes)


def test_trtllm_memory_fraction_becomes_the_same_kv_bytes_on_the_profile(tmp_path: Path) -> None:
    source, mapped = _map("trtllm-host", tmp_path)
    eng = mapped.scenario.engine
    assert eng.sim_flavor == "trtllm"
    host = mapped.scenario.arms[1].offload
    assert isinstance(host, TrtllmKvCache) and host == source.arms[1].offload
    assert host.host_cache_size == 34359738368
    p = load_profile("h100-llama3-8b")
    free = p.gpu.memory_bytes - p.gpu.weights_bytes - p.gpu.activation_reserve_bytes
    # the simulator's KV bytes at the mapped utilisation = TensorRT-LLM's 0.9 of what weights and activations leave
    assert p.kv_cache_bytes(eng.gpu_memory_utilization) == pytest.approx(0.9 * free, rel=1e-5)
    assert eng.gpu_memory_utilization != source.engine.gpu_memory_utilization


TRACE_SCENARIO = """
name: traced
engine: {kind: vllm, image: vllm/vllm-openai:v0.32.0, model: meta-llama/Llama-3.1-8B-Instruct}
arms:
  - {name: baseline, tier: gpu-only}
  - {name: cpu, tier: cpu, offload: {kind: vllm-native, kv_offloading_size_gib: 8}}
workload: {trace: {path: traces/t.jsonl, mode: closed_loop}}
steps: {levels: [{concurrency: 2, duration_s: 5}]}
"""


def test_a_relative_trace_path_is_made_absolute(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(TRACE_SCENARIO, encoding="utf-8")
    source = load_scenario(path, [])
    mapped = map_scenario(source, PredictTarget(load_profile("h100-llama3-8b"), "h100-llama3-8b", "virtual",
                                                tmp_path / "tiers"))
    trace = mapped.scenario.workload.trace
    assert trace is not None and trace.path == str(tmp_path / "traces" / "t.jsonl")
    assert any(c.startswith("workload.trace.path: traces/t.jsonl ->") for c in mapped.changes)


def test_a_sim_scenario_keeps_its_noise_and_takes_the_profile(tmp_path: Path) -> None:
    source, mapped = _map("demo-sim", tmp_path, profile="h200-llama3-8b", clock="real")
    eng = mapped.scenario.engine
    assert eng.sim_profile == "h200-llama3-8b" and eng.sim_clock == "real"
    assert eng.sim_noise == source.engine.sim_noise is not None
    assert eng.gpu_memory_utilization == source.engine.gpu_memory_utilization == 0.145


def test_harmless_extra_args_are_dropped_with_a_note(tmp_path: Path) -> None:
    source = load_scenario(SCENARIOS / "vllm-tiered.yaml",
                           ['engine.extra_args=["--disable-log-requests", "--uvicorn-log-level", "warning"]'])
    mapped = map_scenario(source, PredictTarget(load_profile("h100-llama3-8b"), "h100-llama3-8b", "virtual",
                                                tmp_path))
    assert mapped.scenario.engine.extra_args == []
    assert any(c.startswith("engine.extra_args: --disable-log-requests --uvicorn-log-level dropped")
               for c in mapped.changes)


def test_every_engine_field_is_in_exactly_one_group_of_the_table() -> None:
    groups = [engine_map.KEPT, engine_map.REPLACED, engine_map.DROPPED, engine_map.CHECKED]
    fields = set(EngineSpec.model_fields)
    assert set().union(*groups) == fields, "a field the mapping does not place (or places but does not exist)"
    assert sum(len(g) for g in groups) == len(fields), "a field in two groups"


def test_a_profile_file_is_named_by_path_and_checked_against_its_model(tmp_path: Path) -> None:
    text = (ROOT / "harness" / "sim" / "profiles" / "h100-llama3-70b-fp8.yaml").read_text(encoding="utf-8")
    path = tmp_path / "my-box.yaml"
    path.write_text(text, encoding="utf-8")
    source = load_scenario(SCENARIOS / "vllm-tiered.yaml", ["engine.model=meta-llama/Llama-3.1-70B-Instruct-FP8",
                                                            "engine.max_model_len=8192"])
    target = PredictTarget(load_profile(path=path), "my-box", "virtual", tmp_path / "tiers", profile_file=path)
    eng = map_scenario(source, target).scenario.engine
    assert eng.sim_profile_file == str(path) and eng.kind == "sim"
