"""Scenario builders for the check tests (imported by the tests here): a small valid base scenario per engine."""

from __future__ import annotations

import copy
from typing import Any

from harness.config.scenario import Scenario
from harness.schema.summary import CheckItem

GIB = 1 << 30

_WORKLOAD: dict[str, Any] = {
    "classes": [{"name": "short", "weight": 1, "prompt_tokens": {"min": 10, "max": 100},
                 "output_tokens": {"min": 5, "max": 50}}],
}
_STEPS: dict[str, Any] = {"levels": [{"concurrency": 2, "duration_s": 10}]}

BASES: dict[str, dict[str, Any]] = {
    "vllm": {
        "name": "t",
        "engine": {"kind": "vllm", "image": "vllm/vllm-openai:v0.32.0", "model": "m", "max_model_len": 4096},
        "arms": [{"name": "baseline", "tier": "gpu-only"},
                 {"name": "cpu", "tier": "cpu", "offload": {"kind": "vllm-native", "kv_offloading_size_gib": 4}}],
        "workload": _WORKLOAD, "steps": _STEPS,
    },
    "trtllm": {
        "name": "t", "engine": {"kind": "trtllm", "image": "nvcr.io/nvidia/tensorrt-llm/release:1.0.0", "model": "m"},
        "arms": [{"name": "baseline", "tier": "gpu-only", "offload": {"kind": "trtllm"}},
                 {"name": "host", "tier": "cpu", "offload": {"kind": "trtllm", "host_cache_size": 4 * GIB}}],
        "workload": _WORKLOAD, "steps": _STEPS,
    },
    "sim": {
        "name": "t", "engine": {"kind": "sim", "model": "m"},
        "arms": [{"name": "baseline", "tier": "gpu-only"},
                 {"name": "cpu", "tier": "cpu", "offload": {"kind": "vllm-native", "kv_offloading_size_gib": 4}}],
        "workload": _WORKLOAD, "steps": _STEPS,
    },
}


def tiered_arm(root_dir: str, *, size_gib: float | None = None, cpu_bytes: int = 4 * GIB,
               name: str = "tiered") -> dict[str, Any]:
    """A vLLM TieringOffloadingSpec arm with one fs tier."""
    tier: dict[str, Any] = {"type": "fs", "root_dir": root_dir}
    if size_gib is not None:
        tier["size_gib"] = size_gib
    return {"name": name, "tier": "tiered",
            "offload": {"kind": "vllm-connector", "spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": cpu_bytes,
                        "secondary_tiers": [tier]}}


def build(engine: str = "vllm", *, engine_set: dict[str, Any] | None = None, **sections: Any) -> Scenario:
    """A validated scenario: the engine's base, with ``engine_set`` merged into ``engine`` and whole sections
    (``arms=[...]``, ``checks={...}``) replaced."""
    data = copy.deepcopy(BASES[engine])
    data["engine"].update(engine_set or {})
    data.update(copy.deepcopy(sections))
    return Scenario.model_validate(data)


def levels(items: list[CheckItem]) -> list[tuple[str, str]]:
    """(name, level) pairs, for compact asserts."""
    return [(i.name, i.level) for i in items]


def errors(items: list[CheckItem]) -> list[CheckItem]:
    """Only the errors."""
    return [i for i in items if i.level == "error"]
