"""Scenario models: offload helpers, engine overrides, validators, and the error-path formatter."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from harness.config.arms import GIB, Arm, FsTier, VllmConnectorOffload
from harness.config.engine import EngineSpec
from harness.config.errors import explain, union_tags
from harness.config.loader import format_loc
from harness.config.steps import StepsSpec


def _arm(offload: dict, tier: str = "cpu") -> Arm:
    return Arm.model_validate({"name": "a", "tier": tier, "offload": offload})


def test_cpu_tier_bytes_for_each_offload_form() -> None:
    assert _arm({"kind": "none"}, "gpu-only").cpu_tier_bytes() == 0
    assert _arm({"kind": "vllm-native", "kv_offloading_size_gib": 1.5}).cpu_tier_bytes() == int(1.5 * GIB)
    assert _arm({"kind": "vllm-connector", "cpu_bytes_to_use": 1234}).cpu_tier_bytes() == 1234
    assert _arm({"kind": "trtllm", "host_cache_size": 99}).cpu_tier_bytes() == 99


def test_fs_tiers_only_for_the_connector() -> None:
    arm = _arm({"kind": "vllm-connector", "spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": 1,
                "secondary_tiers": [{"root_dir": "/mnt/a"}, {"root_dir": "/mnt/b", "size_gib": 2}]}, "tiered")
    assert [t.root_dir for t in arm.fs_tiers()] == ["/mnt/a", "/mnt/b"]
    assert arm.fs_tiers()[0] == FsTier(root_dir="/mnt/a")
    assert _arm({"kind": "vllm-native", "kv_offloading_size_gib": 1}).fs_tiers() == []


@pytest.mark.parametrize(("offload", "message"), [
    ({"spec_name": "TieringOffloadingSpec"}, "needs at least one entry in secondary_tiers"),
    ({"secondary_tiers": [{"root_dir": "/x"}]}, "secondary_tiers need spec_name: TieringOffloadingSpec"),
    ({"spec_name": "TieringOffloadingSpec", "secondary_tiers": [{"root_dir": "/x"}], "store_threshold": 2},
     "store_threshold applies to CPUOffloadingSpec"),
])
def test_connector_validators(offload: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        VllmConnectorOffload.model_validate({"kind": "vllm-connector", "cpu_bytes_to_use": 1, **offload})


def test_engine_launcher_defaults() -> None:
    assert EngineSpec(kind="sim", model="m").effective_launcher == "process"
    assert EngineSpec(kind="vllm", model="m", image="i:1").effective_launcher == "docker"
    assert EngineSpec(kind="sim", model="m", served_model_name="s").name_served == "s"
    with pytest.raises(ValidationError, match="must look like sha256"):
        EngineSpec(kind="vllm", model="m", image="i:1", image_digest="abc")
    with pytest.raises(ValidationError, match="size like 16g"):
        EngineSpec(kind="vllm", model="m", image="i:1", shm_size="lots")


@pytest.mark.parametrize("gpus", ["all", "2", "0,1", "device=3", "GPU-abc-123"])
def test_gpus_values(gpus: str) -> None:
    assert EngineSpec(kind="vllm", model="m", image="i:1", gpus=gpus).gpus == gpus


def test_steps_must_rise_and_not_mix() -> None:
    with pytest.raises(ValidationError, match="steps must rise"):
        StepsSpec.model_validate({"levels": [{"concurrency": 8, "duration_s": 1}, {"concurrency": 4, "duration_s": 1}]})
    with pytest.raises(ValidationError, match="mixes closed-loop and open-loop"):
        StepsSpec.model_validate({"levels": [{"concurrency": 8, "duration_s": 1}, {"rate_rps": 9, "duration_s": 1}]})


def test_format_loc_drops_union_tags_and_wrappers_only() -> None:
    assert format_loc(("arms", 1, "offload", "vllm-connector", "secondary_tiers", 0, "root_dir")) == \
        "arms[1].offload.secondary_tiers[0].root_dir"
    assert format_loc(("engine", "env", "vllm-native")) == "engine.env.vllm-native"
    assert format_loc(("arms", 0, "function-after[_x(), Arm]", "name")) == "arms[0].name"
    assert format_loc(()) == ""


def test_union_tags() -> None:
    assert list(union_tags(Arm.model_fields["offload"].annotation)) == ["none", "vllm-native", "vllm-connector",
                                                                        "trtllm"]
    assert union_tags(int) == {}


def test_explain_against_another_root() -> None:
    path, msg = explain({"type": "extra_forbidden", "loc": ("prot",), "msg": "x", "input": 1}, EngineSpec)
    assert path == "prot" and "did you mean 'port'?" in msg
