"""NVIDIA's container settings (ipc host, memlock/stack ulimits) and the tier-sized shm reach docker and compose."""

from __future__ import annotations

from pathlib import Path

import yaml

from harness.config.arms import Arm
from harness.config.engine import EngineSpec
from harness.engines import build_launch_spec
from harness.launch.base import LaunchContext
from harness.launch.compose import render_compose
from harness.launch.docker import container_options

GIB = 1 << 30
TRT = EngineSpec(kind="trtllm", image="nvcr.io/nvidia/tensorrt-llm/release:1.0.0", model="m")
HOST = Arm.model_validate({"name": "host", "tier": "cpu", "offload": {"kind": "trtllm", "host_cache_size": GIB}})


def test_trtllm_docker_options_carry_ipc_host_and_ulimits(tmp_path: Path) -> None:
    spec = build_launch_spec(TRT, HOST)
    opts = container_options(spec, LaunchContext(run_id="r", log_path=tmp_path / "l", work_dir=tmp_path / "w"))
    assert opts["ipc_mode"] == "host" and opts["shm_size"] is None
    assert {(u["Name"], u["Soft"], u["Hard"]) for u in opts["ulimits"]} == {("memlock", -1, -1),
                                                                           ("stack", 67108864, 67108864)}


def test_compose_renders_the_same_settings() -> None:
    svc = yaml.safe_load(render_compose(build_launch_spec(TRT, HOST), "p"))["services"]["engine"]
    assert svc["ipc"] == "host" and svc["ulimits"] == {"memlock": -1, "stack": 67108864} and "shm_size" not in svc
    vllm = EngineSpec(kind="vllm", image="vllm/vllm-openai:v0.32.0", model="m")
    arm = Arm.model_validate({"name": "c", "tier": "cpu", "offload": {"kind": "vllm-native",
                                                                      "kv_offloading_size_gib": 32}})
    svc = yaml.safe_load(render_compose(build_launch_spec(vllm, arm), "p"))["services"]["engine"]
    assert int(svc["shm_size"]) > 32 * GIB and "ipc" not in svc
    assert svc["entrypoint"] == ["vllm", "serve"] and svc["command"][0] == "m"
