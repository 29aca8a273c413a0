"""What the simulator cannot model is refused with the field named (exit 2, one line, never a traceback)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.config import ScenarioError, load_scenario
from harness.predict.mapping import PredictTarget, map_scenario
from harness.predict.model_match import compare_models
from harness.predict.refusal import PredictRefused
from harness.sim.profile import load_profile

ROOT = Path(__file__).resolve().parents[3]
TIERED = ROOT / "scenarios" / "vllm-tiered.yaml"
TRTLLM = ROOT / "scenarios" / "trtllm-host.yaml"


def _refused(path: Path, overrides: list[str], tmp_path: Path, profile: str = "h100-llama3-8b") -> PredictRefused:
    source = load_scenario(path, overrides)
    with pytest.raises(PredictRefused) as info:
        map_scenario(source, PredictTarget(load_profile(profile), profile, "virtual", tmp_path))
    return info.value


@pytest.mark.parametrize(("path", "overrides", "field", "words"), [
    (TIERED, ["engine.tensor_parallel_size=2"], "engine.tensor_parallel_size", "one GPU"),
    (TIERED, ['engine.extra_args=["--disable-log-stats", "--kv-cache-dtype", "fp8"]'], "engine.extra_args[1]",
     "--kv-cache-dtype"),
    (TIERED, ["engine.env={VLLM_USE_SIMPLE_KV_OFFLOAD: '1', VLLM_LOGGING_LEVEL: INFO}"],
     "engine.env.VLLM_USE_SIMPLE_KV_OFFLOAD", "engine setting"),
    (TIERED, ["engine.model=Qwen/Qwen3-32B"], "engine.model", "4.0x apart in size"),
    (TIERED, ["engine.max_model_len=200000"], "engine.max_model_len", "131072"),
    (TIERED, ["drills=[{kind: storage_pressure, fill_gib: 10}]"], "drills[0].kind", "no simulated meaning"),
    (TIERED, ["arms[1].engine={tensor_parallel_size: 2}"], "arms[1].engine.tensor_parallel_size", "one GPU"),
    (TRTLLM, ["arms[1].offload.max_tokens=100000"], "arms[1].offload.max_tokens", "not model"),
    (TRTLLM, ["arms[1].offload.secondary_offload_min_priority=50"], "arms[1].offload.secondary_offload_min_priority",
     "offload none"),
    (TRTLLM, ["arms[1].offload.free_gpu_memory_fraction=0.8"], "arms[1].offload.free_gpu_memory_fraction",
     "differs from the baseline"),
    (TRTLLM, ["arms[1].offload.enable_partial_reuse=true"], "arms[1].offload.enable_partial_reuse", "not modelled"),
])
def test_the_refusal_names_the_field(path: Path, overrides: list[str], field: str, words: str,
                                     tmp_path: Path) -> None:
    exc = _refused(path, overrides, tmp_path)
    assert exc.field == field
    assert str(exc).startswith(f"{field}: ") and words in str(exc)


def test_sim_args_of_a_sim_scenario_are_refused(tmp_path: Path) -> None:
    exc = _refused(ROOT / "scenarios" / "demo-sim.yaml", ['engine.sim_args=["--error-rate", "0.1"]'], tmp_path,
                   profile="h200-llama3-8b")
    assert exc.field == "engine.sim_args"


def test_an_external_server_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "external.yaml"
    path.write_text("""
name: ext
engine: {kind: vllm, launcher: external, model: meta-llama/Llama-3.1-8B-Instruct}
arms:
  - {name: baseline, tier: gpu-only, server: {base_url: "http://10.0.0.1:8000"}}
  - name: cpu
    tier: cpu
    offload: {kind: vllm-native, kv_offloading_size_gib: 8}
    server: {base_url: "http://10.0.0.2:8000"}
workload: {classes: [{name: a, weight: 1, prompt_tokens: {min: 10, max: 20}, output_tokens: {min: 4, max: 8}}]}
steps: {levels: [{concurrency: 2, duration_s: 5}]}
""", encoding="utf-8")
    exc = _refused(path, [], tmp_path)
    assert exc.field == "engine.launcher" and "external" in str(exc)


def test_lmcache_is_refused_when_the_scenario_is_read() -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(ROOT / "scenarios" / "vllm-cpu-pilot.yaml", ["arms[1].offload.kv_offloading_backend=lmcache"])
    assert "arms[1].offload.kv_offloading_backend" in str(info.value) and "LMCache" in str(info.value)


@pytest.mark.parametrize(("mine", "theirs", "outcome"), [
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "match"),
    ("/models/llama-3.1-8b-instruct/", "meta-llama/Llama-3.1-8B-Instruct", "match"),
    ("meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct", "match"),  # a fine-tune of the same weights
    ("meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-70B-Instruct-FP8", "warning"),  # quantisation
    ("my-org/custom-chat-model", "meta-llama/Llama-3.1-8B-Instruct", "warning"),  # size not spelled
    ("Qwen/Qwen2.5-7B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "warning"),  # 1.14x: within the ratio
    ("meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "refusal"),
    ("Qwen/Qwen2.5-0.5B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", "refusal"),
])
def test_what_the_model_check_compares(mine: str, theirs: str, outcome: str) -> None:
    got = compare_models(mine, theirs, "p")
    assert ("refusal" if got.refusal else "warning" if got.warning else "match") == outcome
    if got.warning:
        assert theirs in got.warning and "read this prediction as one for" in got.warning


def test_a_model_mismatch_warning_is_kept_for_the_reports(tmp_path: Path) -> None:
    source = load_scenario(TIERED, ["engine.model=meta-llama/Llama-3.1-8B-Instruct-AWQ"])
    mapped = map_scenario(source, PredictTarget(load_profile("h100-llama3-8b"), "h100-llama3-8b", "virtual",
                                                tmp_path))
    (warning,) = mapped.warnings
    assert warning.startswith("engine.model: ") and "quantisation AWQ vs none spelled" in warning


def test_the_command_exits_2_naming_the_field(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["predict", str(TIERED), "--profile", "h100-llama3-8b", "--out",
                                      str(tmp_path), "--set", "engine.tensor_parallel_size=4"])
    assert result.exit_code == 2
    assert "engine.tensor_parallel_size: 4: the simulator models one GPU" in result.stderr
    assert not list(tmp_path.iterdir())  # nothing ran, no run directory


@pytest.mark.parametrize(("args", "words"), [
    (["--profile", "h900-nope"], "--profile: unknown profile 'h900-nope'"),
    ([], "--profile: give a profile name"),
    (["--profile", "demo", "--clock", "fast"], "--clock"),
])
def test_bad_options_exit_2(args: list[str], words: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["predict", str(TIERED), "--out", str(tmp_path), *args])
    assert result.exit_code == 2 and words in result.stderr


def test_no_traceback_through_the_real_entry_point(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "harness", "predict", str(TRTLLM), "--profile", "h100-llama3-8b",
                           "--out", str(tmp_path), "--set", "arms[1].offload.max_tokens=1000"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
    assert proc.returncode == 2
    assert "arms[1].offload.max_tokens" in proc.stderr and "Traceback" not in proc.stderr + proc.stdout
