"""Golden launch specs for every arm kind of every engine, compared exactly.

Regenerate after an intended change with ``UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/engines`` and review the
diff of ``tests/golden/engines/``. The interpreter path of local-process launches is written as ``<python>``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.config.arms import Arm
from harness.config.engine import EngineSpec
from harness.engines import build_launch_spec

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "engines"
GIB = 1 << 30

VLLM = {"kind": "vllm", "image": "vllm/vllm-openai:v0.32.0", "model": "meta-llama/Llama-3.1-8B-Instruct",
        "served_model_name": "llama-3.1-8b", "max_model_len": 32768, "max_num_seqs": 256,
        "max_num_batched_tokens": 8192, "model_cache_dir": "/var/cache/huggingface", "env": {"HF_TOKEN": "${HF_TOKEN}"}}
TRTLLM = {"kind": "trtllm", "image": "nvcr.io/nvidia/tensorrt-llm/release:1.0.0",
          "model": "meta-llama/Llama-3.1-8B-Instruct", "max_model_len": 32768, "max_num_seqs": 256,
          "max_num_batched_tokens": 8192, "model_cache_dir": "/var/cache/huggingface"}
SIM = {"kind": "sim", "model": "sim-llama", "max_model_len": 8192, "sim_time_scale": 0.5, "sim_args": ["--seed", "3"]}

GPU_ONLY = {"name": "baseline", "tier": "gpu-only"}
NATIVE = {"name": "cpu-16g", "tier": "cpu", "offload": {"kind": "vllm-native", "kv_offloading_size_gib": 16}}
CONNECTOR = {"name": "cpu-32g", "tier": "cpu",
             "offload": {"kind": "vllm-connector", "cpu_bytes_to_use": 32 * GIB, "block_size": 64,
                         "eviction_policy": "arc", "store_threshold": 2, "offload_prompt_only": False}}
TIERING = {"name": "cpu-32g-nvme", "tier": "tiered",
           "offload": {"kind": "vllm-connector", "spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": 32 * GIB,
                       "secondary_tiers": [{"type": "fs", "root_dir": "/mnt/nvme/kv-tier", "n_read_threads": 8,
                                            "n_write_threads": 4, "size_gib": 500}]}}
TRT_BASE = {"name": "baseline", "tier": "gpu-only", "offload": {"kind": "trtllm", "host_cache_size": 0}}
TRT_NONE = {"name": "baseline", "tier": "gpu-only"}
TRT_HOST = {"name": "host-32g", "tier": "cpu",
            "offload": {"kind": "trtllm", "host_cache_size": 32 * GIB, "secondary_offload_min_priority": 35,
                        "max_tokens": 200000, "enable_partial_reuse": True}}
SIM_TRT_HOST = {"name": "host-8g", "tier": "cpu",
                "offload": {"kind": "trtllm", "host_cache_size": 8 * GIB, "tokens_per_block": 16}}

CASES: dict[str, tuple[dict[str, Any], dict[str, Any], int | None]] = {
    # vLLM in its container
    "vllm-docker-gpu-only": (VLLM, GPU_ONLY, None),
    "vllm-docker-native-cpu": (VLLM, NATIVE, None),
    "vllm-docker-connector-cpu": (VLLM, CONNECTOR, None),
    "vllm-docker-tiering-fs": (VLLM, TIERING, None),
    "vllm-docker-tp2-no-prefix-caching": ({**VLLM, "tensor_parallel_size": 2, "enable_prefix_caching": False,
                                           "gpus": "0,1", "extra_args": ["--seed", "1"]}, NATIVE, 18000),
    # vLLM as a local process
    "vllm-process-gpu-only": ({**VLLM, "launcher": "process", "port": 8100}, GPU_ONLY, None),
    "vllm-process-tiering-fs": ({**VLLM, "launcher": "process"}, TIERING, 18001),
    # TensorRT-LLM
    "trtllm-docker-baseline": (TRTLLM, TRT_BASE, None),
    "trtllm-docker-baseline-kind-none": (TRTLLM, TRT_NONE, None),
    "trtllm-docker-host-cache": (TRTLLM, TRT_HOST, None),
    "trtllm-process-host-cache": ({**TRTLLM, "launcher": "process"}, TRT_HOST, 18002),
    # TensorRT-LLM per release (harness/engines/trtllm-versions.yaml): 1.0 keys only; later releases their extras
    "trtllm-1.1-docker-host-cache": ({**TRTLLM, "image": "nvcr.io/nvidia/tensorrt-llm/release:1.1.0rc5"}, TRT_HOST,
                                     None),
    "trtllm-1.3-docker-host-cache": ({**TRTLLM, "image": "nvcr.io/nvidia/tensorrt-llm/release:1.3.0",
                                      "tensor_parallel_size": 2},
                                     {**TRT_HOST, "offload": {**TRT_HOST["offload"], "tokens_per_block": 64}}, None),
    # exact sizes: 0.0048828125 GiB is 5242880 bytes, rendered so vLLM computes exactly that
    "vllm-docker-native-fractional-gib": (VLLM, {**NATIVE, "offload": {"kind": "vllm-native",
                                                                       "kv_offloading_size_gib": 0.0048828125}}, None),
    # the simulator, each offload form
    "sim-process-gpu-only": (SIM, GPU_ONLY, 18003),
    "sim-process-native-cpu": (SIM, NATIVE, 18003),
    "sim-process-connector-cpu": (SIM, CONNECTOR, 18003),
    "sim-process-tiering-fs": (SIM, TIERING, 18003),
    "sim-process-trtllm-host": ({**SIM, "sim_flavor": "trtllm", "sim_profile": "h200-llama3-8b"}, SIM_TRT_HOST,
                                18003),
    "sim-docker-tiering-fs": ({**SIM, "launcher": "docker", "image": "kvoffload-harness-sim:0.1.0",
                               "sim_profile_file": "/profiles/custom.yaml"}, TIERING, None),
}


def render(engine: dict[str, Any], arm: dict[str, Any], host_port: int | None) -> str:
    """The launch spec as stable JSON, with the command line on top for reading."""
    spec = build_launch_spec(EngineSpec.model_validate(engine), Arm.model_validate(arm), host_port=host_port)
    data = {"command": spec.command_line(), **spec.model_dump(mode="json")}
    text = json.dumps(data, indent=2, sort_keys=False) + "\n"
    return text.replace(json.dumps(sys.executable)[1:-1], "<python>")


def check_golden(path: Path, text: str) -> None:
    """Compare with the golden file exactly; ``UPDATE_GOLDEN=1`` rewrites it instead."""
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.is_file(), f"{path} is missing; create it with UPDATE_GOLDEN=1 and review it"
    expected = path.read_text(encoding="utf-8")
    assert text == expected, f"{path.name} differs from the golden file; if intended, rerun with UPDATE_GOLDEN=1"


@pytest.mark.parametrize("case", sorted(CASES))
def test_launch_spec_golden(case: str) -> None:
    engine, arm, port = CASES[case]
    check_golden(GOLDEN / f"{case}.json", render(engine, arm, port))


def test_every_golden_file_has_a_case() -> None:
    stale = sorted(p.stem for p in GOLDEN.glob("*.json") if p.stem not in CASES)
    assert not stale, f"golden files without a test case (delete them): {stale}"
