"""Arm checks: baseline first and gpu-only, unique names, tier order, tier vs offload, one dimension at a time."""

from __future__ import annotations

from checks_helpers import GIB, build, levels, tiered_arm

from harness.plan.checks.arms import check_arm_order, check_one_dimension, check_tiers

BASE = {"name": "baseline", "tier": "gpu-only"}
CPU = {"name": "cpu", "tier": "cpu", "offload": {"kind": "vllm-native", "kv_offloading_size_gib": 4}}


def _errors(items: list) -> list[str]:
    return [i.message for i in items if i.level == "error"]


def test_arm_order_ok() -> None:
    [item] = check_arm_order(build(arms=[BASE, CPU, tiered_arm("/mnt/kv")]))
    assert item.level == "ok" and "baseline (gpu-only) -> cpu (cpu) -> tiered (tiered)" in item.message


def test_baseline_must_be_first_and_gpu_only() -> None:
    msgs = _errors(check_arm_order(build(arms=[CPU, BASE])))
    assert any("arms[0] (cpu) is tier cpu; the first arm must be the gpu-only baseline" in m for m in msgs)


def test_arm_names_unique() -> None:
    msgs = _errors(check_arm_order(build(arms=[BASE, CPU, {**CPU}])))
    assert msgs == ["arm names must be unique; repeated: cpu"]


def test_tiers_must_not_go_down_and_one_gpu_only() -> None:
    msgs = _errors(check_arm_order(build(arms=[BASE, tiered_arm("/mnt/kv"), CPU])))
    assert msgs == ["arms[2] (cpu, cpu) comes after tiered; order arms gpu-only -> cpu -> tiered"]
    msgs = _errors(check_arm_order(build(arms=[BASE, {"name": "again", "tier": "gpu-only"}])))
    assert msgs == ["arms[1] (again) is a second gpu-only arm; only the baseline is gpu-only"]


def test_tiers_match_offload_ok() -> None:
    assert levels(check_tiers(build(arms=[BASE, CPU, tiered_arm("/mnt/kv")]))) == [("tier-offload", "ok")]
    assert levels(check_tiers(build("trtllm"))) == [("tier-offload", "ok")]


def test_gpu_only_arm_with_offload() -> None:
    msgs = _errors(check_tiers(build(arms=[{**CPU, "name": "b", "tier": "gpu-only"}, CPU])))
    assert msgs == ["arms[0].offload: a gpu-only arm must not configure offload (use kind: none)"]


def test_cpu_arm_without_tier_or_with_disk() -> None:
    msgs = _errors(check_tiers(build(arms=[BASE, {"name": "cpu", "tier": "cpu"}])))
    assert len(msgs) == 1 and msgs[0].startswith("arms[1].offload: a cpu arm needs a CPU tier; valid: kind vllm-native")
    disk = {**tiered_arm("/mnt/kv"), "tier": "cpu"}
    msgs = _errors(check_tiers(build(arms=[BASE, disk])))
    assert msgs and "a CPU tier and no secondary tier" in msgs[0]


def test_trtllm_cpu_arm_with_zero_host_cache() -> None:
    arms = [{"name": "baseline", "tier": "gpu-only", "offload": {"kind": "trtllm"}},
            {"name": "host", "tier": "cpu", "offload": {"kind": "trtllm", "host_cache_size": 0}}]
    msgs = _errors(check_tiers(build("trtllm", arms=arms)))
    assert msgs == ["arms[1].offload: a cpu arm needs a CPU tier; valid: kind trtllm with host_cache_size > 0 (bytes)"]


def test_tiered_arm_needs_the_tiering_connector() -> None:
    arms = [BASE, CPU, {**CPU, "name": "t", "tier": "tiered"}]
    msgs = _errors(check_tiers(build(arms=arms)))
    assert msgs == ["arms[2].offload: a tiered arm needs kind vllm-connector with spec_name TieringOffloadingSpec "
                    "and an fs entry in secondary_tiers"]


def test_tiered_arm_for_trtllm_explains_host_memory_only() -> None:
    arms = [{"name": "baseline", "tier": "gpu-only", "offload": {"kind": "trtllm"}},
            {"name": "tiered", "tier": "tiered", "offload": {"kind": "trtllm", "host_cache_size": GIB}}]
    items = check_tiers(build("trtllm", arms=arms))
    assert levels(items) == [("tiered-trtllm", "error")]
    assert "only host-memory offload (kv_cache_config.host_cache_size) is configured for TensorRT-LLM" in \
        items[0].message


def test_tiered_trtllm_arm_with_a_vllm_connector_gets_both_explanations() -> None:
    arms = [{"name": "baseline", "tier": "gpu-only", "offload": {"kind": "trtllm"}}, tiered_arm("/mnt/kv")]
    names = [i.name for i in check_tiers(build("trtllm", arms=arms))]
    assert names == ["tiered-trtllm", "offload-form"]


def test_vllm_offload_kind_on_trtllm() -> None:
    arms = [{"name": "baseline", "tier": "gpu-only"}, CPU]
    msgs = _errors(check_tiers(build("trtllm", arms=arms)))
    assert msgs == ["arms[1].offload.kind: vllm-native is not a trtllm setting; valid for trtllm: none, trtllm"]


def test_trtllm_offload_kind_on_vllm() -> None:
    arms = [BASE, {"name": "host", "tier": "cpu", "offload": {"kind": "trtllm", "host_cache_size": GIB}}]
    msgs = _errors(check_tiers(build(arms=arms)))
    assert msgs == ["arms[1].offload.kind: trtllm is not a vllm setting; valid for vllm: none, vllm-native, "
                    "vllm-connector"]


def test_sim_offload_kinds_follow_the_flavor() -> None:
    arms = [BASE, {"name": "host", "tier": "cpu", "offload": {"kind": "trtllm", "host_cache_size": GIB}}]
    msgs = _errors(check_tiers(build("sim", arms=arms)))
    assert msgs == ["arms[1].offload.kind: trtllm is not a sim (sim_flavor vllm) setting; valid for sim (sim_flavor "
                    "vllm): none, vllm-native, vllm-connector"]
    assert levels(check_tiers(build("sim", arms=arms, engine_set={"sim_flavor": "trtllm"}))) == [("tier-offload", "ok")]


def test_one_dimension_ok() -> None:
    assert levels(check_one_dimension(build(arms=[BASE, CPU, tiered_arm("/mnt/kv")]))) == [("one-dimension", "ok")]
    assert levels(check_one_dimension(build("trtllm"))) == [("one-dimension", "ok")]


def test_one_dimension_names_every_differing_field() -> None:
    arm = {**CPU, "engine": {"max_num_seqs": 128, "gpu_memory_utilization": 0.8}}
    items = check_one_dimension(build(arms=[BASE, arm], engine_set={"max_num_seqs": 256}))
    msgs = _errors(items)
    assert len(msgs) == 2
    assert msgs[0].startswith("arms[1].engine.gpu_memory_utilization differs from the baseline (0.9 -> 0.8)")
    assert msgs[1].startswith("arms[1].engine.max_num_seqs differs from the baseline (256 -> 128)")
    assert all(i.arm == "cpu" for i in items)


def test_one_dimension_override_on_the_baseline() -> None:
    base = {**BASE, "engine": {"max_num_seqs": 64}}
    msgs = _errors(check_one_dimension(build(arms=[base, CPU])))
    assert msgs and msgs[0].startswith("arms[0].engine.max_num_seqs differs from the baseline (64 -> None)")


def test_trtllm_cache_settings_besides_offload_warn() -> None:
    arms = [{"name": "baseline", "tier": "gpu-only", "offload": {"kind": "trtllm"}},
            {"name": "host", "tier": "cpu", "offload": {"kind": "trtllm", "host_cache_size": GIB,
                                                        "free_gpu_memory_fraction": 0.8,
                                                        "secondary_offload_min_priority": 50}}]
    items = check_one_dimension(build("trtllm", arms=arms))
    assert levels(items) == [("one-dimension", "warn")]
    assert "arms[1].offload.free_gpu_memory_fraction differs from the baseline (0.9 -> 0.8)" in items[0].message


def test_tiered_arm_should_keep_the_cpu_tier() -> None:
    cpu = {"name": "cpu", "tier": "cpu", "offload": {"kind": "vllm-connector", "cpu_bytes_to_use": 4 * GIB}}
    items = check_one_dimension(build(arms=[BASE, cpu, tiered_arm("/mnt/kv", cpu_bytes=8 * GIB)]))
    assert levels(items) == [("one-dimension", "warn")]
    assert "arms[2] (tiered)" in items[0].message and "arms[1] (cpu)" in items[0].message
