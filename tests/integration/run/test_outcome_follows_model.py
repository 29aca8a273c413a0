"""The demo's decisions follow from the simulated hardware: change the model, and the decisions change with it.

Same traffic, same rules; only the simulated CPU tier's size (or the disk's speed) differs between the two runs of
each test. The decisions are the point, so the runs are on the virtual clock (``engine.sim_clock: virtual``,
``sim_time_scale`` 1.0: deterministic, whatever the host's load). The modelled steps are 32 s, twice the real-time
version's (8 s at time scale 0.5 = 16 s modelled): in 16 s the 16 GiB tier's gain at c16 (1.44x, interval from
1.08, limit 1.12) was not settled on the virtual clock. Throughput (less noisy than a p95 over a few dozen
requests) is the measure a tier must improve.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.run.options import RunOptions
from harness.run.orchestrator import run_rollout
from harness.schema.summary import Summary

pytestmark = pytest.mark.slow

# 16 and 32 users fill the demo's GPU KV cache: at lower load the fit screen (rightly) holds every tier.
STEPS = {"warmup": {"duration_s": 2, "concurrency": 2},
         "levels": [{"concurrency": 16, "duration_s": 32}, {"concurrency": 32, "duration_s": 32}],
         "scrape_interval_s": 1, "stream_idle_timeout_s": 40, "drain_timeout_s": 10}
# The disk test: a fast disk behind an inert 2 GiB CPU tier (below the GPU's ~2.9 GiB) buys ~1.15x output tokens/s
# now that the fs tier is vLLM 0.32's (write-through, a lookup one engine step later); see DISK_RULES.
RULES = {"window_s": 4, "budgets": [], "regression": [],
         "earns_keep": {"measures": ["output_tokens_per_s"], "min_improvement": 1.12, "min_samples": 5}}


# The disk test's effect is smaller (~1.16x over an inert CPU tier): 32 s steps give it the requests to show it
# (with half as long steps its interval, e.g. [1.07, 1.26], straddled the 1.08 limit in about one CI run in two)
DISK_STEPS = STEPS
# ... held against the scenario default min_improvement 1.05 (measured 1.15x [1.09, 1.22] at c16, alone)
DISK_RULES = {**RULES, "earns_keep": {**RULES["earns_keep"], "min_improvement": 1.05}}  # type: ignore[dict-item]


def run(short_scenario: Callable[..., Path], tmp_path: Path, name: str, arms: list[dict[str, Any]],
        sim_args: list[str] | None = None, steps: dict[str, Any] | None = None,
        rules: dict[str, Any] | None = None) -> Summary:
    engine = {"sim_args": sim_args or []}
    path = short_scenario(name=name, arms=arms, steps=steps or STEPS, rules=rules or RULES, engine=engine,
                          clock="virtual")
    result = run_rollout(path, RunOptions(out_dir=tmp_path / name, write_reports=False), say=lambda m: None)
    assert result.summary is not None, result.message
    return result.summary


def cpu_arm(gib: float) -> dict[str, Any]:
    return {"name": "cpu", "tier": "cpu", "offload": {"kind": "vllm-native", "kv_offloading_size_gib": gib}}


def decision(summary: Summary, arm: str) -> str:
    return next(a.decision for a in summary.arms if a.name == arm)


def test_cpu_tier_size_changes_the_decision(short_scenario: Callable[..., Path], tmp_path: Path) -> None:
    base = {"name": "baseline", "tier": "gpu-only"}
    big = run(short_scenario, tmp_path, "big", [base, cpu_arm(16)])
    tiny = run(short_scenario, tmp_path, "tiny", [base, cpu_arm(0.02)])
    big_cpu = next(a for a in big.arms if a.name == "cpu")
    tiny_cpu = next(a for a in tiny.arms if a.name == "cpu")
    assert sum((s.hit_tokens.cpu or 0) for s in big_cpu.steps) > sum((s.hit_tokens.cpu or 0) for s in tiny_cpu.steps)
    assert decision(big, "cpu") == "go", big_cpu.reasons
    assert decision(tiny, "cpu") == "hold", tiny_cpu.reasons
    assert big.verdict == "go" and big.recommended_arm == "cpu"
    assert tiny.verdict == "hold" and tiny.recommended_arm == "baseline"


def test_disk_speed_changes_the_tiered_decision(short_scenario: Callable[..., Path], tmp_path: Path) -> None:
    tiered = {"name": "tiered", "tier": "tiered",
              "offload": {"kind": "vllm-connector", "spec_name": "TieringOffloadingSpec",
                          "cpu_bytes_to_use": 2 << 30,  # stages the disk's writes and reads (vLLM 0.32)
                          "secondary_tiers": [{"type": "fs", "root_dir": str(tmp_path / "tier"), "size_gib": 64}]}}
    base = {"name": "baseline", "tier": "gpu-only"}
    fast = run(short_scenario, tmp_path, "fast-disk", [base, cpu_arm(2), tiered], steps=DISK_STEPS,
               rules=DISK_RULES)
    slow = run(short_scenario, tmp_path, "slow-disk", [base, cpu_arm(2), tiered],
               sim_args=["--disk-read-slowdown", "200"], steps=DISK_STEPS, rules=DISK_RULES)
    fast_t = next(a for a in fast.arms if a.name == "tiered")
    slow_t = next(a for a in slow.arms if a.name == "tiered")
    assert sum((s.hit_tokens.disk or 0) for s in fast_t.steps) > 0
    fast_tps = max(s.output_tokens_per_s or 0 for s in fast_t.steps)
    slow_tps = max(s.output_tokens_per_s or 0 for s in slow_t.steps)
    assert slow_tps < fast_tps, (fast_tps, slow_tps)
    assert decision(fast, "tiered") == "go", fast_t.reasons
    assert decision(slow, "tiered") in ("hold", "no-go"), slow_t.reasons
