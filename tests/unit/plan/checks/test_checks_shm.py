"""/dev/shm: sized from the CPU tier, an explicit shm_size that cannot hold it refused, host /dev/shm for local
processes, TensorRT-LLM's per-rank host cache counted x TP, a tier smaller than one block refused."""

from __future__ import annotations

import json
from pathlib import Path

from checks_helpers import GIB, build, levels

from harness.engines import build_launch_spec
from harness.engines.shm import FLOOR, shm_need
from harness.host.facts import FakeHostFacts
from harness.plan.checks.blocks import check_tier_holds_a_block
from harness.plan.checks.resources import check_host_headroom, host_tier_bytes
from harness.plan.checks.shm import check_shm

TIER32 = {"name": "cpu", "tier": "cpu", "offload": {"kind": "vllm-connector", "cpu_bytes_to_use": 32 * GIB}}
BASE = {"name": "baseline", "tier": "gpu-only"}


def test_container_shm_is_sized_from_the_tier() -> None:
    scenario = build(arms=[BASE, TIER32])
    need = shm_need(scenario.engine, scenario.arms[1])
    assert need.size_bytes is not None and need.size_bytes >= 32 * GIB + need.own_bytes
    spec = build_launch_spec(scenario.engine, scenario.arms[1])
    assert spec.shm_size == str(need.size_bytes) and spec.ipc_mode is None
    assert shm_need(scenario.engine, scenario.arms[0]).size_bytes == FLOOR
    assert levels(check_shm(scenario, FakeHostFacts())) == [("shm", "ok")]


def test_an_explicit_shm_size_that_cannot_hold_the_tier_is_refused_with_the_fix() -> None:
    items = check_shm(build(arms=[BASE, TIER32], engine_set={"shm_size": "16g"}), FakeHostFacts())
    assert levels(items) == [("shm", "error")]
    message = items[0].message
    assert "Insufficient space in /dev/shm" in message and "engine.shm_size: 36g" in message
    assert "engine.ipc: host" in message


def test_ipc_host_uses_the_hosts_dev_shm() -> None:
    scenario = build(arms=[BASE, TIER32], engine_set={"ipc": "host"})
    spec = build_launch_spec(scenario.engine, scenario.arms[1])
    assert spec.ipc_mode == "host" and spec.shm_size is None
    assert levels(check_shm(scenario, FakeHostFacts(shm_free=8 * GIB))) == [("shm", "error")]
    assert levels(check_shm(scenario, FakeHostFacts(shm_free=64 * GIB))) == [("shm", "ok")]


def test_a_local_process_needs_the_tier_free_in_the_hosts_dev_shm() -> None:
    scenario = build(arms=[BASE, TIER32], engine_set={"launcher": "process"})
    items = check_shm(scenario, FakeHostFacts(shm_free=16 * GIB))
    assert levels(items) == [("shm", "error")] and "remount" in items[0].message
    assert build_launch_spec(scenario.engine, scenario.arms[1]).shm_size is None


def test_a_tp2_trtllm_host_tier_counts_twice() -> None:
    scenario = build("trtllm", engine_set={"tensor_parallel_size": 2})
    tier, note = host_tier_bytes(scenario, scenario.arms[1])
    assert tier == 8 * GIB and "x 2 TP ranks" in note
    items = check_host_headroom(scenario, FakeHostFacts(mem_available=20 * GIB))
    assert "8.0 GiB" in items[0].message and items[0].level == "ok"
    tight = check_host_headroom(build("trtllm", engine_set={"tensor_parallel_size": 2},
                                      checks={"host_reserve_gib": 10}), FakeHostFacts(mem_available=16 * GIB))
    assert tight[0].level == "error"  # 8 GiB (x2) + 10 > 16; a per-rank count (4 + 10) would have passed


def test_a_tier_smaller_than_one_block_is_refused(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"num_hidden_layers": 32, "num_attention_heads": 32,
                                                   "num_key_value_heads": 8, "hidden_size": 4096,
                                                   "torch_dtype": "bfloat16"}))
    tiny = {"name": "cpu", "tier": "cpu", "offload": {"kind": "vllm-native", "kv_offloading_size_gib": 0.001}}
    items = check_tier_holds_a_block(build(arms=[BASE, tiny], engine_set={"model": str(model)}))
    assert levels(items) == [("tier-blocks", "error")]
    assert "cannot hold one KV block" in items[0].message and "2097152 bytes" in items[0].message
    ok = check_tier_holds_a_block(build(arms=[BASE, TIER32], engine_set={"model": str(model)}))
    assert levels(ok) == [("tier-blocks", "ok")] and "16384 blocks" in ok[0].message
    hub = check_tier_holds_a_block(build(arms=[BASE, TIER32], engine_set={"model": "org/not-here"}))
    assert "not on this machine" in hub[0].message
