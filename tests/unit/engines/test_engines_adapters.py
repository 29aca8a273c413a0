"""Engine adapters beyond the golden files: wrong offload kinds, the registry, the simulator's own CLI accepting the
flags its adapter writes, and the launch spec helpers."""

from __future__ import annotations

import json
from typing import get_args

import pytest
import typer

from harness.config.arms import Arm
from harness.config.engine import EngineKind, EngineSpec
from harness.engines import REGISTRY, adapter_for, build_launch_spec
from harness.engines.registry import ADAPTER_CLASSES
from harness.engines.spec import LaunchSpec
from harness.engines.trtllm import advertised_model_name, render_config
from harness.engines.vllm import connector_config, offload_args

GIB = 1 << 30
TRT_ARM = Arm.model_validate({"name": "h", "tier": "cpu", "offload": {"kind": "trtllm", "host_cache_size": GIB}})
NATIVE_ARM = Arm.model_validate({"name": "c", "tier": "cpu",
                                 "offload": {"kind": "vllm-native", "kv_offloading_size_gib": 0.5}})
VLLM = EngineSpec(kind="vllm", model="m", image="vllm/vllm-openai:v0.32.0")
TRTLLM = EngineSpec(kind="trtllm", model="m", image="nvcr.io/nvidia/tensorrt-llm/release:1.0.0")


def test_registry_knows_the_three_engines() -> None:
    adapter_for("vllm")
    assert sorted(REGISTRY) == ["sim", "trtllm", "vllm"]
    with pytest.raises(KeyError, match="no engine adapter for kind 'sglang'; known: sim, trtllm, vllm"):
        adapter_for("sglang")


def test_registry_is_built_from_the_adapter_classes() -> None:
    assert {kind: type(adapter) for kind, adapter in REGISTRY.items()} == {cls.kind: cls for cls in ADAPTER_CLASSES}
    assert sorted(REGISTRY) == sorted(get_args(EngineKind))  # every engine.kind a scenario may name has an adapter


def test_vllm_refuses_a_trtllm_offload() -> None:
    with pytest.raises(ValueError, match="not a vLLM setting"):
        offload_args(TRT_ARM)
    with pytest.raises(ValueError, match="not a vLLM setting"):
        build_launch_spec(VLLM, TRT_ARM)


def test_trtllm_refuses_a_vllm_offload() -> None:
    with pytest.raises(ValueError, match="not a TensorRT-LLM setting"):
        render_config(TRTLLM, NATIVE_ARM)


def test_native_size_keeps_fractions() -> None:
    assert offload_args(NATIVE_ARM) == ["--kv-offloading-size", "0.5", "--kv-offloading-backend", "native"]


def test_connector_config_maps_disk_dirs() -> None:
    arm = Arm.model_validate({"name": "t", "tier": "tiered", "offload": {
        "kind": "vllm-connector", "spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": GIB,
        "secondary_tiers": [{"root_dir": "/a"}, {"root_dir": "/b"}]}})
    assert arm.offload.kind == "vllm-connector"
    cfg = connector_config(arm.offload, disk_dir_map={"/a": "/kv-tier/0"})  # type: ignore[arg-type]
    assert [t["root_dir"] for t in cfg["kv_connector_extra_config"]["secondary_tiers"]] == ["/kv-tier/0", "/b"]
    spec = build_launch_spec(VLLM, arm)
    value = json.loads(spec.args[spec.args.index("--kv-transfer-config") + 1])
    assert value["kv_connector_extra_config"]["spec_name"] == "TieringOffloadingSpec"
    assert [t["root_dir"] for t in value["kv_connector_extra_config"]["secondary_tiers"]] == ["/kv-tier/0",
                                                                                          "/kv-tier/1"]
    assert [(v.host_path, v.container_path) for v in spec.volumes] == [("/a", "/kv-tier/0"), ("/b", "/kv-tier/1")]
    assert spec.disk_tier_dirs == ["/a", "/b"]


@pytest.mark.parametrize(("model", "name"), [
    ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct"),
    ("/models/llama-8b", "llama-8b"),
    ("/models/llama-8b/", "llama-8b"),
])
def test_trtllm_advertised_model_name(model: str, name: str) -> None:
    assert advertised_model_name(model) == name
    spec = build_launch_spec(TRTLLM.model_copy(update={"model": model, "served_model_name": "ignored"}), TRT_ARM)
    assert spec.served_model_name == name


def test_launch_spec_helpers() -> None:
    spec = LaunchSpec(engine="vllm", arm="a", entrypoint=["x"], args=["--a", "b c"], container_port=1, host="::1",
                      host_port=8000, served_model_name="m")
    assert spec.argv() == ["x", "--a", "b c"]
    assert spec.command_line() == "x --a 'b c'"
    assert spec.base_url() == "http://[::1]:8000"


SIM_ARMS = [
    {"name": "baseline", "tier": "gpu-only"},
    {"name": "n", "tier": "cpu", "offload": {"kind": "vllm-native", "kv_offloading_size_gib": 2}},
    {"name": "c", "tier": "cpu", "offload": {"kind": "vllm-connector", "cpu_bytes_to_use": GIB, "block_size": 32}},
    {"name": "t", "tier": "tiered", "offload": {"kind": "vllm-connector", "spec_name": "TieringOffloadingSpec",
                                                "cpu_bytes_to_use": GIB,
                                                "secondary_tiers": [{"root_dir": "/tmp/kv", "size_gib": 1}]}},
]


@pytest.mark.parametrize("arm", SIM_ARMS, ids=[a["name"] for a in SIM_ARMS])
def test_sim_cli_accepts_every_flag_the_adapter_writes(arm: dict) -> None:
    from harness.sim.cli import sim_app

    engine = EngineSpec(kind="sim", model="m", max_model_len=4096, max_num_seqs=8, max_num_batched_tokens=512,
                        served_model_name="s", enable_prefix_caching=False)
    spec = build_launch_spec(engine, Arm.model_validate(arm), host_port=18000)
    serve = typer.main.get_command(sim_app).commands["serve"]  # type: ignore[attr-defined]
    ctx = serve.make_context("serve", list(spec.args))  # parses and type-checks; starts nothing
    assert ctx.params["port"] == 18000


def test_sim_cli_accepts_the_trtllm_flavor_flags() -> None:
    from harness.sim.cli import sim_app

    engine = EngineSpec(kind="sim", model="m", sim_flavor="trtllm")
    spec = build_launch_spec(engine, TRT_ARM, host_port=18000)
    serve = typer.main.get_command(sim_app).commands["serve"]  # type: ignore[attr-defined]
    ctx = serve.make_context("serve", list(spec.args))
    assert ctx.params["host_cache_size"] == GIB and ctx.params["flavor"] == "trtllm"


def test_sim_refuses_an_offload_of_the_other_flavor() -> None:
    with pytest.raises(ValueError, match=r"engine\.sim_flavor: trtllm"):
        build_launch_spec(EngineSpec(kind="sim", model="m"), TRT_ARM)
    with pytest.raises(ValueError, match=r"engine\.sim_flavor: vllm"):
        build_launch_spec(EngineSpec(kind="sim", model="m", sim_flavor="trtllm"), NATIVE_ARM)
