"""``kv_offloading_backend: lmcache`` is refused at load (vLLM 0.32 maps it to LMCacheMPConnector, which needs an
LMCache server the harness does not start and ignores kv_offloading_size)."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_scenarios import load_with, refused

from harness.config.arms import LMCACHE_REFUSED, VllmNativeOffload
from harness.config.loader import load_scenario

REPO = Path(__file__).resolve().parents[3]


def native_arms(backend: str) -> list[dict[str, object]]:
    return [{"name": "baseline", "tier": "gpu-only"},
            {"name": "cpu", "tier": "cpu", "offload": {"kind": "vllm-native", "kv_offloading_size_gib": 4,
                                                       "kv_offloading_backend": backend}}]


def test_lmcache_is_refused_with_the_reason_and_the_alternatives() -> None:
    text = refused("arms[1].offload.kv_offloading_backend: kv_offloading_backend lmcache is not supported",
                   arms=native_arms("lmcache"))
    for part in ("LMCacheMPConnector", "vllm/config/vllm.py", "tcp://localhost:5555", "ignores kv_offloading_size",
                 "/dev/shm", "kv_offloading_backend: native", "engine.launcher: external"):
        assert part in text, part


def test_native_still_loads_and_is_the_default() -> None:
    assert load_with(arms=native_arms("native")).arms[1].offload == VllmNativeOffload(
        kind="vllm-native", kv_offloading_size_gib=4)
    with pytest.raises(ValueError, match="LMCacheMPConnector"):
        VllmNativeOffload.model_validate({"kind": "vllm-native", "kv_offloading_size_gib": 1,
                                          "kv_offloading_backend": "LMCache"})
    assert "engine.launcher: external" in LMCACHE_REFUSED


@pytest.mark.parametrize("path", sorted((REPO / "scenarios").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_scenario_still_loads(path: Path) -> None:
    load_scenario(path)
