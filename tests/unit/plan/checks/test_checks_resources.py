"""Host checks with injected facts: memory headroom, disk tiers, GPU runtime; and the runner."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from checks_helpers import GIB, build, levels, tiered_arm

from harness.host import disk_tier
from harness.host.facts import FakeHostFacts, nearest_existing
from harness.plan.checks import resources
from harness.plan.checks.resources import check_disk_tiers, check_gpu_runtime, check_host_headroom
from harness.plan.checks.runner import ALL_CHECKS, has_errors, run_checks
from harness.sim.cache.fs import FsTier

BASE = {"name": "baseline", "tier": "gpu-only"}


def _cpu(gib: float) -> dict:
    return {"name": "cpu", "tier": "cpu", "offload": {"kind": "vllm-native", "kv_offloading_size_gib": gib}}


def test_headroom_fits() -> None:
    items = check_host_headroom(build(arms=[BASE, _cpu(16)]), FakeHostFacts(mem_available=64 * GIB))
    assert levels(items) == [("host-headroom", "ok")]
    assert "CPU tier 16.0 GiB + reserve 8.0 GiB" in items[0].message and "64.0 GiB available" in items[0].message


def test_headroom_error_states_both_sizes() -> None:
    scenario = build(arms=[BASE, _cpu(32)], checks={"host_reserve_gib": 16})
    [item] = check_host_headroom(scenario, FakeHostFacts(mem_available=24 * GIB))
    assert item.level == "error" and item.arm == "cpu"
    assert "CPU tier 32.0 GiB + reserve 16.0 GiB (checks.host_reserve_gib) = 48.0 GiB" in item.message
    assert "exceeds the host's available memory 24.0 GiB" in item.message
    assert "at most 8.0 GiB with this reserve" in item.message


def test_headroom_warns_when_tight() -> None:
    items = check_host_headroom(build(arms=[BASE, _cpu(20)]), FakeHostFacts(mem_available=30 * GIB))
    assert levels(items) == [("host-headroom", "warn")]


def test_vllm_size_is_the_total_across_tp_ranks() -> None:
    scenario = build(arms=[BASE, _cpu(16)], engine_set={"tensor_parallel_size": 4})
    [item] = check_host_headroom(scenario, FakeHostFacts(mem_available=30 * GIB))
    assert item.level == "ok"  # 16 GiB in all, not 4 x 16
    assert "CPU tier 16.0 GiB (total across 4 TP ranks)" in item.message


def test_trtllm_host_cache_is_per_rank() -> None:
    scenario = build("trtllm", engine_set={"tensor_parallel_size": 2})  # host_cache_size 4 GiB
    [item] = check_host_headroom(scenario, FakeHostFacts(mem_available=14 * GIB))
    assert item.level == "error"
    assert "CPU tier 8.0 GiB (4.0 GiB host_cache_size per rank x 2 TP ranks)" in item.message


def test_simulated_tier_is_not_allocated() -> None:
    [item] = check_host_headroom(build("sim", arms=[BASE, _cpu(64)]), FakeHostFacts(mem_available=4 * GIB))
    assert item.level == "ok" and "modelled, not allocated" in item.message


def test_no_cpu_tier_no_headroom_item() -> None:
    assert check_host_headroom(build(arms=[BASE]), FakeHostFacts()) == []


def _disk(tmp_path: Path, root: str, engine: str = "vllm", size_gib: float | None = None,
          free: int = 500 * GIB, **kw: object) -> list:
    scenario = build(engine, arms=[BASE, tiered_arm(root, size_gib=size_gib)], **kw)
    return check_disk_tiers(scenario, FakeHostFacts(disk_free={root: free}, default_disk_free=1))


def test_disk_tier_absent_directory_is_ok_and_reports_free_space(tmp_path: Path) -> None:
    root = str(tmp_path / "kv")
    items = _disk(tmp_path, root, free=123 * GIB)
    assert levels(items) == [("disk-tier", "ok"), ("disk-tier-cap", "warn")]
    assert f"arms[1].offload.secondary_tiers[0].root_dir: {root} is absent; 123.0 GiB free" in items[0].message
    assert "no size cap of its own" in items[1].message and "123.0 GiB" in items[1].message


def test_disk_tier_empty_and_ours_are_ok(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert _disk(tmp_path, str(tmp_path / "empty"))[0].level == "ok"
    ours = tmp_path / "ours"
    disk_tier.claim(ours, "run-0")  # a marker the harness wrote (a hand-made one is refused: tests/reliability)
    FsTier(ours, namespace=0, chunk_tokens=256, chunk_bytes=1 << 20).write(1)  # what the engine wrote there
    [item, _] = _disk(tmp_path, str(ours))
    assert item.level == "ok" and "is ours" in item.message


def test_disk_tier_foreign_directory_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "precious.txt").write_text("keep me")
    [item] = _disk(tmp_path, str(tmp_path / "data"))
    assert item.level == "error" and "holds files the harness did not create" in item.message
    assert (tmp_path / "data" / "precious.txt").read_text() == "keep me"


def test_disk_tier_file_instead_of_directory(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    assert _disk(tmp_path, str(tmp_path / "f"))[0].level == "error"


def test_disk_tier_unreadable_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "locked").mkdir()

    def denied(path: object) -> object:
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(disk_tier.os, "scandir", denied)
    [item] = _disk(tmp_path, str(tmp_path / "locked"))
    assert item.level == "error" and "cannot be read" in item.message


@pytest.mark.parametrize(("root", "why"), [
    ("kv-tier", "must be an absolute path"),
    ("/", "is a system directory"),
    ("//", "is a system directory"),
    ("/var/lib/", "is a system directory"),
    ("/etc/kv", "inside a system directory tree"),
    ("/usr/share/kv", "inside a system directory tree"),
    ("/home", "is a system directory"),
])
def test_disk_tier_path_rules(tmp_path: Path, root: str, why: str) -> None:
    [item] = _disk(tmp_path, root)
    assert item.level == "error" and why in item.message
    assert item.message.startswith("arms[1].offload.secondary_tiers[0].root_dir: ")


def test_disk_tier_home_directory_and_links_to_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = str(tmp_path / "home" / "alice")
    os.makedirs(home)
    monkeypatch.setenv("HOME", home)
    [item] = _disk(tmp_path, home)
    assert item.level == "error" and "is a home directory" in item.message
    link = tmp_path / "link"
    link.symlink_to(home)
    [item] = _disk(tmp_path, str(link))
    assert item.level == "error" and f"-> {os.path.realpath(home)}" in item.message


def test_disk_tier_size_against_free_space(tmp_path: Path) -> None:
    root = str(tmp_path / "kv")
    [item, _] = _disk(tmp_path, root, size_gib=100, free=105 * GIB, checks={"disk_reserve_gib": 10})
    assert item.level == "error"
    assert "tier size 100.0 GiB (size_gib) + reserve 10.0 GiB (checks.disk_reserve_gib) = 110.0 GiB" in item.message
    assert "exceeds the free disk 105.0 GiB" in item.message
    [item, _] = _disk(tmp_path, root, size_gib=100, free=111 * GIB, checks={"disk_reserve_gib": 10})
    assert item.level == "ok" and "fits" in item.message


def test_sim_disk_tier_has_no_cap_warning_and_no_size_error(tmp_path: Path) -> None:
    items = _disk(tmp_path, str(tmp_path / "kv"), engine="sim", size_gib=1000, free=GIB)
    assert levels(items) == [("disk-tier", "ok")]
    assert "small headers" in items[0].message


def test_nearest_existing(tmp_path: Path) -> None:
    assert nearest_existing(tmp_path / "a" / "b") == tmp_path


@pytest.mark.parametrize(("mode", "level"), [("plan", "warn"), ("run", "error")])
def test_gpu_runtime_missing(mode: str, level: str) -> None:
    [item] = check_gpu_runtime(build(), FakeHostFacts(gpu=(False, "no driver")), mode)
    assert item.level == level and "no driver" in item.message and "NVIDIA Container Toolkit" in item.message


def test_gpu_runtime_present_or_not_needed() -> None:
    assert levels(check_gpu_runtime(build(), FakeHostFacts(), "run")) == [("gpu-runtime", "ok")]
    assert check_gpu_runtime(build("sim"), FakeHostFacts(gpu=(False, "x")), "run") == []
    process = build(engine_set={"launcher": "process"})
    assert check_gpu_runtime(process, FakeHostFacts(gpu=(False, "x")), "run") == []
    sim_docker = build("sim", engine_set={"launcher": "docker", "image": "harness-sim:0.1.0"})
    assert check_gpu_runtime(sim_docker, FakeHostFacts(gpu=(False, "x")), "run") == []


def test_run_checks_runs_every_check_in_order(tmp_path: Path) -> None:
    scenario = build(arms=[BASE, _cpu(4), tiered_arm(str(tmp_path / "kv"))])
    items = run_checks(scenario, host=FakeHostFacts())
    names = list(dict.fromkeys(i.name for i in items))
    assert names == ["pinned-image", "arm-order", "tier-offload", "one-dimension", "weight-offload", "extra-args",
                     "lengths", "host-headroom", "disk-tier", "disk-tier-cap", "shm", "tier-blocks",
                     "tier-capacity", "gpu-runtime"]
    assert not has_errors(items)
    assert list(ALL_CHECKS) == ["pinned-image", "arm-order", "tier-offload", "one-dimension", "weight-offload",
                                "extra-args", "trtllm-release", "served-name", "lengths", "host-headroom",
                                "disk-tier", "shm", "tier-blocks", "tier-capacity", "gpu-runtime", "env-refs", "trace",
                                "sim-start", "master-bind"]
    assert has_errors(run_checks(scenario, host=FakeHostFacts(mem_available=GIB)))


def test_run_mode_turns_missing_gpu_runtime_into_an_error() -> None:
    host = FakeHostFacts(gpu=(False, "none"))
    assert not has_errors(run_checks(build(), host=host, mode="plan"))
    assert has_errors(run_checks(build(), host=host, mode="run"))


def test_host_tier_bytes_helper() -> None:
    scenario = build("trtllm", engine_set={"tensor_parallel_size": 4})
    assert resources.host_tier_bytes(scenario, scenario.arms[1]) == (16 * GIB, " (4.0 GiB host_cache_size per rank "
                                                                                 "x 4 TP ranks)")
