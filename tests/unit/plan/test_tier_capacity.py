"""The ``tier-capacity`` plan check: a CPU tier no larger than the GPU KV cache the arm will have mirrors the GPU and
adds (next to) no hits. The GPU KV estimate's sources (simulator profile, the model's config.json with the GPU's
memory), the boundary at equal size, TensorRT-LLM's evicting host cache, and the facts it names when it cannot
estimate."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Literal

import pytest
import yaml
from typer.testing import CliRunner

from harness.cli import app
from harness.config import load_scenario
from harness.config.scenario import Scenario
from harness.host.facts import FakeHostFacts
from harness.plan.checks import runner
from harness.plan.checks.runner import ALL_CHECKS, run_checks
from harness.plan.checks.tier_capacity import (
    NAME,
    GpuKv,
    Unknown,
    check_tier_capacity,
    estimate_gpu_kv,
    kv_bytes_per_token,
)
from harness.sim.config import build_engine_config
from harness.sim.profile import load_profile

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "scenarios" / "demo-sim.yaml"
GIB = 1 << 30
# demo-sim: profile h200-llama3-8b at gpu_memory_utilization 0.145 -> 1485 blocks x 16 tokens x 128 KiB
DEMO_GPU_KV = 1485 * 16 * 131072
WORKLOAD: dict[str, Any] = {"classes": [{"name": "c", "weight": 1, "prompt_tokens": {"min": 10, "max": 100},
                                         "output_tokens": {"min": 5, "max": 50}}]}
STEPS: dict[str, Any] = {"levels": [{"concurrency": 2, "duration_s": 10}]}
BASE = {"name": "baseline", "tier": "gpu-only"}


def _scenario(engine: dict[str, Any], *arms: dict[str, Any], checks: dict[str, Any] | None = None) -> Scenario:
    data: dict[str, Any] = {"name": "t", "engine": engine, "arms": [BASE, *arms], "workload": WORKLOAD,
                            "steps": STEPS}
    if checks:
        data["checks"] = checks
    return Scenario.model_validate(copy.deepcopy(data))


def _demo_sim(**engine: Any) -> dict[str, Any]:
    return {"kind": "sim", "model": "m", "sim_profile": "h200-llama3-8b", "gpu_memory_utilization": 0.145,
            "max_model_len": 8192, **engine}


def _native(gib: float, name: str = "cpu") -> dict[str, Any]:
    return {"name": name, "tier": "cpu", "offload": {"kind": "vllm-native", "kv_offloading_size_gib": gib}}


def _connector(cpu_bytes: int, name: str = "cpu") -> dict[str, Any]:
    return {"name": name, "tier": "cpu", "offload": {"kind": "vllm-connector", "cpu_bytes_to_use": cpu_bytes}}


def _demo_variant(tmp_path: Path, gib: float) -> Path:
    """demo-sim.yaml with its cpu arm's tier set to ``gib`` (written in tmp_path, never in scenarios/)."""
    data = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    cpu = next(a for a in data["arms"] if a["tier"] == "cpu")
    cpu["offload"]["kv_offloading_size_gib"] = gib
    path = tmp_path / "demo-variant.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


# --- the simulator profile source ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("profile", "util", "offload"), [
    ("h200-llama3-8b", 0.145, {"kind": "vllm-native", "kv_offloading_size_gib": 1}),
    ("h200-llama3-8b", 0.9, {"kind": "vllm-native", "kv_offloading_size_gib": 1}),
    ("demo", 0.9, {"kind": "vllm-native", "kv_offloading_size_gib": 1}),
    ("demo", 0.9, {"kind": "trtllm", "host_cache_size": GIB, "tokens_per_block": 32}),
])
def test_sim_estimate_is_the_simulators_own_gpu_kv_cache(profile: str, util: float, offload: dict[str, Any]) -> None:
    flavor: Literal["vllm", "trtllm"] = "trtllm" if offload["kind"] == "trtllm" else "vllm"
    arm = {"name": "cpu", "tier": "cpu", "offload": offload}
    base = {"name": "baseline", "tier": "gpu-only", "offload": {"kind": "trtllm"}} if flavor == "trtllm" else BASE
    scenario = Scenario.model_validate({"name": "t", "engine": {"kind": "sim", "model": "m", "sim_profile": profile,
                                        "sim_flavor": flavor, "gpu_memory_utilization": util},
                                        "arms": [base, arm], "workload": WORKLOAD, "steps": STEPS})
    got = estimate_gpu_kv(scenario, scenario.arms[1])
    cfg = build_engine_config(load_profile(profile), flavor=flavor, gpu_memory_utilization=util,
                              block_size=offload.get("tokens_per_block"), max_model_len=1024)
    assert isinstance(got, GpuKv)
    assert got.bytes == cfg.num_gpu_blocks * cfg.block_size * cfg.kv_bytes_per_token
    assert got.bytes_per_token == cfg.kv_bytes_per_token and not got.upper_bound
    assert f"simulator profile {profile}" in got.source and f"{cfg.num_gpu_blocks} blocks" in got.source


def test_demo_profile_is_558_blocks_of_320_kib_tokens() -> None:
    scenario = _scenario({"kind": "sim", "model": "m", "sim_profile": "demo"}, _native(1))
    got = estimate_gpu_kv(scenario, scenario.arms[1])
    assert isinstance(got, GpuKv) and got.bytes == 558 * 16 * 327680  # ~2.7 GiB


def test_sim_profile_file_is_read_relative_to_the_scenario(tmp_path: Path) -> None:
    text = (ROOT / "harness" / "sim" / "profiles" / "demo.yaml").read_text(encoding="utf-8")
    (tmp_path / "mine.yaml").write_text(text.replace("memory_bytes: 85521350656", "memory_bytes: 95521350656"),
                                        encoding="utf-8")
    scenario = _scenario({"kind": "sim", "model": "m", "sim_profile_file": "mine.yaml"}, _native(1))
    scenario.set_source_file(str(tmp_path / "s.yaml"))
    got = estimate_gpu_kv(scenario, scenario.arms[1])
    assert isinstance(got, GpuKv) and "simulator profile file mine.yaml" in got.source
    assert got.bytes > 558 * 16 * 327680  # the file's bigger GPU, not the built-in profile


def test_an_unreadable_profile_file_cannot_estimate(tmp_path: Path) -> None:
    scenario = _scenario({"kind": "sim", "model": "m", "sim_profile_file": str(tmp_path / "absent.yaml")},
                         _native(1))
    [item] = check_tier_capacity(scenario)
    assert item.level == "ok" and item.message.startswith("cannot estimate the GPU KV cache of this arm")
    assert "absent.yaml" in item.message


# --- the boundary and the message ----------------------------------------------------------------------------------

def test_a_tier_equal_to_the_gpu_kv_cache_is_warned_one_byte_more_is_not() -> None:
    equal = check_tier_capacity(_scenario(_demo_sim(), _connector(DEMO_GPU_KV)))
    above = check_tier_capacity(_scenario(_demo_sim(), _connector(DEMO_GPU_KV + 1)))
    assert [(i.name, i.level, i.arm) for i in equal] == [(NAME, "warn", "cpu")]
    assert [(i.name, i.level) for i in above] == [(NAME, "ok")]
    assert "1.0x the GPU KV cache" in above[0].message


def test_the_warning_states_both_sizes_the_source_and_a_size_that_adds_capacity() -> None:
    [item] = check_tier_capacity(_scenario(_demo_sim(), _native(1)))
    assert item.level == "warn"
    assert item.message.startswith("CPU tier 1.0 GiB ≤ GPU KV cache ~2.9 GiB (simulator profile h200-llama3-8b: "
                                   "0.145 x 140.4 GiB - weights 15.0 GiB - activation reserve 2.5 GiB = 1485 blocks "
                                   "x 16 tokens x 128 KiB/token)")
    assert "mirrors what the GPU already holds and adds (next to) no hits" in item.message
    assert "a tier above 2.9 GiB adds capacity, e.g. 4x = 11.6 GiB holds ~95k tokens, ~71k beyond the GPU's ~24k" \
        in item.message


def test_a_larger_tier_is_ok_with_what_it_adds() -> None:
    [item] = check_tier_capacity(_scenario(_demo_sim(), _native(16)))
    assert item.level == "ok"
    assert item.message.startswith("CPU tier 16.0 GiB is 5.5x the GPU KV cache ~2.9 GiB (simulator profile")
    assert "~131k tokens, ~107k beyond what the GPU keeps" in item.message


def test_the_cpu_part_of_a_tiered_arm_is_checked(tmp_path: Path) -> None:
    tiered = {"name": "tiered", "tier": "tiered", "offload": {
        "kind": "vllm-connector", "spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": GIB,
        "secondary_tiers": [{"type": "fs", "root_dir": str(tmp_path / "kv")}]}}
    [item] = check_tier_capacity(_scenario(_demo_sim(), tiered))
    assert item.level == "warn" and item.arm == "tiered"
    assert "the CPU part of a tiered arm: the disk tier behind it still adds capacity" in item.message


def test_gpu_only_arms_get_no_item() -> None:
    assert check_tier_capacity(_scenario(_demo_sim())) == []


# --- TensorRT-LLM: the host cache takes what the GPU evicts ---------------------------------------------------------

def _trtllm(kind: str, host_bytes: int) -> Scenario:
    engine = ({"kind": "trtllm", "image": "nvcr.io/nvidia/tensorrt-llm/release:1.0.0", "model": "m"} if kind == "trtllm"
              else _demo_sim(sim_flavor="trtllm"))
    return Scenario.model_validate({"name": "t", "engine": engine, "workload": WORKLOAD, "steps": STEPS, "arms": [
        {"name": "baseline", "tier": "gpu-only", "offload": {"kind": "trtllm"}},
        {"name": "host", "tier": "cpu", "offload": {"kind": "trtllm", "host_cache_size": host_bytes}}]})


def test_a_small_trtllm_host_cache_adds_capacity_and_is_not_warned() -> None:
    [item] = check_tier_capacity(_trtllm("trtllm", GIB))
    assert (item.name, item.level, item.arm) == (NAME, "ok", "host")
    assert "takes the blocks the GPU evicts" in item.message and "1.0 GiB host tier adds its size" in item.message


def test_the_simulated_trtllm_host_cache_names_the_gpu_kv_it_adds_to() -> None:
    [item] = check_tier_capacity(_trtllm("sim", GIB))
    assert item.level == "ok" and "takes the blocks the GPU evicts" in item.message
    # the trtllm flavour's blocks are tokens_per_block (32) tokens: 742 blocks of 32 x 128 KiB
    assert "simulator profile h200-llama3-8b" in item.message and "742 blocks x 32 tokens" in item.message


# --- real engines: the model's config.json and the GPU's memory ----------------------------------------------------

def _local_model(tmp_path: Path, *, weights: int | None = 16_060_522_496) -> Path:
    model = tmp_path / "llama"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096,
        "torch_dtype": "bfloat16"}), encoding="utf-8")
    if weights is not None:
        (model / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": weights},
                                                                        "weight_map": {}}), encoding="utf-8")
    return model


def _vllm(model: str = "m", **engine: Any) -> dict[str, Any]:
    return {"kind": "vllm", "image": "vllm/vllm-openai:v0.32.0", "model": model, **engine}


def test_without_gpu_memory_or_model_config_it_says_what_is_missing() -> None:
    [item] = check_tier_capacity(_scenario(_vllm(), _native(1)))
    assert (item.name, item.level) == (NAME, "ok")
    assert item.message.startswith("cannot estimate the GPU KV cache of this arm: no GPU on this host reports its "
                                   "memory (nvidia-smi); the model config.json of m is not on this machine.")
    assert "The CPU tier (1.0 GiB) is not compared with it here" in item.message


def test_with_the_model_on_this_machine_only_the_gpu_memory_is_missing(tmp_path: Path) -> None:
    scenario = _scenario(_vllm(str(_local_model(tmp_path))), _native(1))
    [item] = check_tier_capacity(scenario)
    assert item.level == "ok" and "no GPU on this host reports its memory (nvidia-smi)." in item.message
    assert "config.json" not in item.message
    assert kv_bytes_per_token(scenario, scenario.arms[1]) == (131072, str(tmp_path / "llama" / "config.json"))


def test_without_weights_the_weights_size_is_missing(tmp_path: Path) -> None:
    scenario = _scenario(_vllm(str(_local_model(tmp_path, weights=None))), _native(1))
    got = estimate_gpu_kv(scenario, scenario.arms[1], gpu_memory_bytes=80 * GIB)
    assert isinstance(got, Unknown) and len(got.missing) == 1 and "weights' size" in got.missing[0]


def test_config_json_and_gpu_memory_give_an_upper_bound(tmp_path: Path) -> None:
    scenario = _scenario(_vllm(str(_local_model(tmp_path)), tensor_parallel_size=2), _native(100), _native(200, "big"))
    got = estimate_gpu_kv(scenario, scenario.arms[1], gpu_memory_bytes=80 * GIB)
    assert isinstance(got, GpuKv) and got.upper_bound
    assert got.bytes == int(2 * 80 * GIB * 0.9) - 16_060_522_496  # two ranks' share minus all the weights
    assert str(tmp_path / "llama" / "config.json") in got.source and "activation reserve" in got.source
    small, big = check_tier_capacity(scenario, gpu_memory_bytes=80 * GIB)
    assert small.level == "warn" and "≤ GPU KV cache at most 129.0 GiB" in small.message
    assert big.level == "ok"


def test_trtllm_upper_bound_is_the_free_fraction_after_weights(tmp_path: Path) -> None:
    engine = {"kind": "trtllm", "image": "nvcr.io/nvidia/tensorrt-llm/release:1.0.0",
              "model": str(_local_model(tmp_path))}
    scenario = Scenario.model_validate({"name": "t", "engine": engine, "workload": WORKLOAD, "steps": STEPS, "arms": [
        {"name": "baseline", "tier": "gpu-only", "offload": {"kind": "trtllm"}},
        {"name": "host", "tier": "cpu", "offload": {"kind": "trtllm", "host_cache_size": GIB, "max_tokens": 100_000}}]})
    got = estimate_gpu_kv(scenario, scenario.arms[1], gpu_memory_bytes=80 * GIB)
    assert isinstance(got, GpuKv) and got.bytes == 100_000 * 131072  # max_tokens caps 0.9 x (80 GiB - weights)


def test_bytes_per_token_falls_back_to_the_declared_figure() -> None:
    declared = _scenario(_vllm(), _native(1), checks={"kv_bytes_per_token": 4096})
    assert kv_bytes_per_token(declared, declared.arms[1]) == (4096, "checks.kv_bytes_per_token")
    assert kv_bytes_per_token(_scenario(_vllm(), _native(1)), declared.arms[1]) is None
    sim = _scenario(_demo_sim(), _native(1), checks={"kv_bytes_per_token": 4096})
    assert kv_bytes_per_token(sim, sim.arms[1]) == (131072, "simulator profile h200-llama3-8b")  # the profile first


# --- wired into the runner and `harness plan` ----------------------------------------------------------------------

def test_the_runner_runs_it_after_tier_blocks() -> None:
    names = list(ALL_CHECKS)
    assert names.index(NAME) == names.index("tier-blocks") + 1
    items = run_checks(_scenario(_demo_sim(), _native(1)), host=FakeHostFacts())
    assert [(i.level, i.arm) for i in items if i.name == NAME] == [("warn", "cpu")]


def test_shipped_demo_tiers_are_not_warned() -> None:
    scenario = load_scenario(DEMO)
    items = check_tier_capacity(scenario)
    assert [(i.arm, i.level) for i in items] == [("cpu-16g", "ok"), ("cpu-16g-disk", "ok")]


def test_harness_plan_shows_the_item_for_the_demo_with_a_1_gib_tier(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "OsHostFacts", lambda: FakeHostFacts(mem_available=256 * GIB))
    result = CliRunner().invoke(app, ["plan", str(_demo_variant(tmp_path, 1)), "--json"])
    assert result.exit_code == 0, result.output
    checks = [c for c in json.loads(result.stdout)["checks"] if c["name"] == NAME]
    assert [(c["arm"], c["level"]) for c in checks] == [("cpu-16g", "warn"), ("cpu-16g-disk", "ok")]
    assert checks[0]["message"].startswith("CPU tier 1.0 GiB ≤ GPU KV cache ~2.9 GiB (simulator profile "
                                           "h200-llama3-8b")
    human = CliRunner().invoke(app, ["plan", str(_demo_variant(tmp_path, 1))])
    assert "warn tier-capacity [cpu-16g]: CPU tier 1.0 GiB ≤ GPU KV cache ~2.9 GiB" in " ".join(human.stdout.split())


def test_harness_plan_on_the_shipped_demo_has_no_tier_capacity_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "OsHostFacts", lambda: FakeHostFacts(mem_available=256 * GIB))
    result = CliRunner().invoke(app, ["plan", str(DEMO), "--json"])
    assert result.exit_code == 0, result.output
    levels = [c["level"] for c in json.loads(result.stdout)["checks"] if c["name"] == NAME]
    assert levels == ["ok", "ok"]


def test_the_plan_reads_this_hosts_gpu_memory_for_a_local_model(tmp_path: Path) -> None:
    """On a GPU box (the host's smallest GPU via nvidia-smi, here a fake with 80 GiB) the config.json bound warns."""
    from harness.host.facts import FakeHostFacts, smallest_gpu_bytes
    from harness.plan.checks.runner import run_checks

    scenario = _scenario(_vllm(str(_local_model(tmp_path))), _native(1))
    [without] = [c for c in run_checks(scenario, host=FakeHostFacts()) if c.name == NAME]
    assert without.level == "ok" and "no GPU on this host reports its memory" in without.message
    [item] = [c for c in run_checks(scenario, host=FakeHostFacts(gpu_memory=80 * GIB)) if c.name == NAME]
    assert item.level == "warn" and "an upper bound" in item.message, item.message
    assert smallest_gpu_bytes("81559\n143771\n") == 81559 << 20
    assert smallest_gpu_bytes("[N/A]\n") is None and smallest_gpu_bytes("") is None
