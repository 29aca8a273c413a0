"""An external arm's opt-in ``server.cold_start: engine-reset``: off by default, and refused at load (naming the
field) where the engine's own reset cannot make the start cold: TensorRT-LLM (no reset endpoint) and an arm with a
disk tier (vLLM 0.32's reset keeps its files)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from harness.config.scenario import Scenario

BASE: dict[str, Any] = {
    "name": "ext", "engine": {"kind": "vllm", "launcher": "external", "model": "m"},
    "workload": {"classes": [{"name": "a", "weight": 1, "prompt_tokens": {"min": 10, "max": 20},
                              "output_tokens": {"min": 1, "max": 2}}]},
    "steps": {"levels": [{"concurrency": 1, "duration_s": 1}]},
}
CPU = {"kind": "vllm-native", "kv_offloading_size_gib": 4}
DISK = {"kind": "vllm-connector", "spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": 4 << 30,
        "secondary_tiers": [{"type": "fs", "root_dir": "/tmp/kv"}]}


def scenario(engine: dict[str, Any], offload: dict[str, Any], cold_start: str | None) -> Scenario:
    server: dict[str, Any] = {"base_url": "http://h:2"}
    if cold_start is not None:
        server["cold_start"] = cold_start
    arms = [{"name": "base", "tier": "gpu-only", "server": {"base_url": "http://h:1"}},
            {"name": "tier", "tier": "tiered" if offload is DISK else "cpu", "offload": offload, "server": server}]
    return Scenario.model_validate({**BASE, "engine": {**BASE["engine"], **engine}, "arms": arms})


def test_the_reset_is_off_by_default_and_loads_for_vllm_and_its_simulator() -> None:
    server = scenario({}, CPU, None).arms[1].server
    assert server is not None and server.cold_start == "as-found"
    for engine in ({}, {"kind": "sim"}):
        reset = scenario(engine, CPU, "engine-reset").arms[1].server
        assert reset is not None and reset.cold_start == "engine-reset"


@pytest.mark.parametrize(("engine", "offload", "words"), [
    ({"kind": "trtllm"}, {"kind": "trtllm", "host_cache_size": 1 << 30}, "no cache-reset endpoint"),
    ({"kind": "sim", "sim_flavor": "trtllm"}, {"kind": "trtllm", "host_cache_size": 1 << 30}, "TensorRT-LLM"),
    ({}, DISK, "keeps a TieringOffloadingSpec's secondary tiers"),
])
def test_where_the_reset_cannot_work_it_is_refused_naming_the_field(engine: dict[str, Any], offload: dict[str, Any],
                                                                    words: str) -> None:
    with pytest.raises(ValidationError) as err:
        scenario(engine, offload, "engine-reset")
    assert "arms[1].server.cold_start" in str(err.value) and words in str(err.value)
    server = scenario(engine, offload, None).arms[1].server  # without the reset the same arm loads
    assert server is not None and server.cold_start == "as-found"


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValidationError):
        scenario({}, CPU, "restart")
