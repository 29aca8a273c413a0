"""Section 4's simulator CPU per 1,000 streamed tokens per tier (``tools.bench.sim_arms``): the parser, the rows and
the goal on how far the tiered arm's simulator falls behind the wall clock; the bench's arms launch the simulator as
the demo scenario does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.bench import sim_arms
from tools.perf import benches
from tools.perf.table import Row

# A real output of the bench (long lines joined with "+").
OUT = (
    "simulator on cpu 0; load generator on cpu 1; 32 streams, 16 tokens each, window 12 s after 3 s\n"
    "arm gpu-only: 9120 streamed tokens (570 requests) in 12.4 s, simulator CPU 1.86 s (15.0% of its core) -> "
    + "0.2039 simulator CPU s per 1,000 streamed tokens; behind the wall clock 0.012 s (0.10% of the window)\n"
    "arm cpu: 11200 streamed tokens (700 requests) in 12.3 s, simulator CPU 2.33 s (18.9% of its core) -> "
    + "0.2080 simulator CPU s per 1,000 streamed tokens; behind the wall clock 0.020 s (0.16% of the window)\n"
    "arm tiered: 11040 streamed tokens (690 requests) in 12.3 s, simulator CPU 2.41 s (19.6% of its core) -> "
    + "0.2183 simulator CPU s per 1,000 streamed tokens; behind the wall clock 0.031 s (0.25% of the window)\n")


def test_the_parser_reads_every_arm() -> None:
    t = benches.parse_sim_arms(OUT)
    assert t["tiered.cpu_s_per_1k"] == pytest.approx(0.2183) and t["cpu.tokens"] == 11200
    assert t["gpu-only.behind_pct"] == pytest.approx(0.10) and t["tiered.requests"] == 690
    with pytest.raises(benches.BenchOutputError):
        benches.parse_sim_arms("Traceback (most recent call last):\n  boom")


def _rows(monkeypatch: pytest.MonkeyPatch, output: str, code: int | None = 0) -> dict[str, Row]:
    monkeypatch.setattr(benches, "run_bench", lambda module, args, timeout_s: benches.BenchRun([module], code,
                                                                                               output, 1.0))
    return {row.figure: row for row in benches.sim_arm_rows(12.0, timeout_s=60)}


RATIO = "simulator CPU per token, tiered / CPU-only arm"
BEHIND = "tiered arm: simulator behind the wall clock, share of the window"


def test_rows_per_arm_the_ratio_and_the_behind_goal(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _rows(monkeypatch, OUT)
    assert rows[RATIO].value == pytest.approx(0.2183 / 0.2080) and rows[RATIO].goal is None
    assert rows[BEHIND].value == pytest.approx(0.25) and rows[BEHIND].goal == benches.SIM_TIER_BEHIND_GOAL
    assert rows[BEHIND].passed
    per_arm = [r for name, r in rows.items() if name.endswith(("gpu-only", ": cpu", "tiered"))]
    assert [r.value for r in per_arm] == [0.2039, 0.2080, 0.2183] and all(r.unit == "s" for r in per_arm)
    late = OUT.replace("0.031 s (0.25% of the window)", "0.985 s (8.01% of the window)")  # a file per chunk
    assert not _rows(monkeypatch, late)[BEHIND].passed


def test_a_missing_arm_or_a_failed_bench_leaves_the_goal_unmet(monkeypatch: pytest.MonkeyPatch) -> None:
    no_tier = "\n".join(line for line in OUT.splitlines() if not line.startswith("arm tiered"))
    rows = _rows(monkeypatch, no_tier)
    assert rows[RATIO].value is None and rows[BEHIND].value is None and rows[BEHIND].passed is False
    assert rows["simulator CPU s per 1,000 streamed tokens, demo load (32 streams): tiered"].error
    failed = _rows(monkeypatch, "boom", code=1)
    assert all(r.value is None and r.error for r in failed.values()) and len(failed) == 5
    assert failed[BEHIND].passed is False


def test_the_arms_are_the_demos(tmp_path: Path) -> None:
    tiered = sim_arms.arm_flags("tiered", tmp_path)
    spec = json.loads(tiered["kv_transfer_config"])["kv_connector_extra_config"]
    assert spec["spec_name"] == "TieringOffloadingSpec" and spec["cpu_bytes_to_use"] == 16 * sim_arms.GIB
    assert spec["secondary_tiers"][0]["root_dir"] == str(tmp_path) and tiered["disk_tier_max_bytes"] == 64 << 30
    assert sim_arms.arm_flags("cpu", tmp_path)["kv_offloading_size"] == 16
    assert "kv_offloading_size" not in sim_arms.arm_flags("gpu-only", tmp_path)
    for arm in sim_arms.ARMS:
        assert sim_arms.arm_flags(arm, tmp_path)["gpu_memory_utilization"] == 0.145
    with pytest.raises(ValueError, match="unknown arm"):
        sim_arms.arm_flags("nvme", tmp_path)
    prompts = sim_arms.Prompts(seed=1)
    lengths = [len(prompts.next().split()) for _ in range(300)]
    assert min(lengths) >= 400 and max(lengths) <= 2400
