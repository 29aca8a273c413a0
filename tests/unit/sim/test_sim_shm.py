"""The simulator mirrors vLLM's /dev/shm start-up check (``--shm-bytes``)."""

from __future__ import annotations

import pytest

from harness.sim.cli import StartupError, resolve_serve

GIB = 1 << 30


def test_a_cpu_tier_larger_than_the_shared_memory_is_refused_with_vllms_message() -> None:
    with pytest.raises(StartupError, match=r"Insufficient space in /dev/shm for CPU KV offload shared region in "
                       r"/dev/shm: 32768 MiB required, 16384 MiB free\. Increase /dev/shm \(e\.g\. --shm-size or "
                       r"--ipc=host\)\."):
        resolve_serve({"kv_offloading_size": 32.0, "shm_bytes": str(16 * GIB)})


def test_a_tier_that_fits_starts_and_no_figure_means_no_check() -> None:
    resolve_serve({"kv_offloading_size": 8.0, "shm_bytes": str(16 * GIB)})
    resolve_serve({"kv_offloading_size": 32.0})
    resolve_serve({"host_cache_size": 32 * GIB, "flavor": "trtllm", "shm_bytes": "1"})  # pinned memory, not shm


def test_sim_in_a_container_gets_its_shm_figure() -> None:
    from harness.config.arms import Arm
    from harness.config.engine import EngineSpec
    from harness.engines import build_launch_spec

    engine = EngineSpec(kind="sim", model="m", launcher="docker", image="kvoffload-harness-sim:0.1.0",
                        shm_size="16g")
    arm = Arm.model_validate({"name": "c", "tier": "cpu", "offload": {"kind": "vllm-native",
                                                                      "kv_offloading_size_gib": 32}})
    spec = build_launch_spec(engine, arm)
    assert spec.args[spec.args.index("--shm-bytes") + 1] == str(16 * GIB) and spec.shm_size == str(16 * GIB)
