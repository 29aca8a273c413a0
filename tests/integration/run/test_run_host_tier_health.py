"""A short simulated rollout records host telemetry and tier health per step, and `harness report` rebuilds them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from harness.decision.summarize import rebuild_summary
from harness.run.options import RunOptions
from harness.run.orchestrator import run_rollout


def test_host_telemetry_and_tier_health_per_step(short_scenario: Callable[..., Path], tmp_path: Path) -> None:
    result = run_rollout(short_scenario(), RunOptions(out_dir=tmp_path / "results"), say=lambda m: None)
    assert result.run_dir is not None
    summary = json.loads((result.run_dir / "summary.json").read_text())
    for arm in summary["arms"]:
        assert (result.run_dir / "metrics" / arm["name"] / "host.jsonl").exists()
        for step in arm["steps"]:
            host = step["host"]
            assert host is not None and host["samples"] >= 1
            assert host["mem_available_min_bytes"] > 0 and host["mem_total_bytes"] > 0
            assert host["disks"] and host["disks"][0]["root_dir"].endswith("kv-tier")  # watched in every arm
            disk = host["disks"][0]
            assert disk["busy_share"] is not None or disk["note"].startswith("not available:")
            if not host["gpus"]:
                assert host["gpu_note"].startswith("not available:")  # said, with the reason, never zeros
    tiered = summary["arms"][2]
    for step in tiered["steps"]:
        health = step["server"]["tier_health"]
        assert {t["tier"] for t in health["tiers"]} == {"0:primary", "1:fs"}
        assert health["stores_dropped"] == 0.0  # the sim declares the family; no drop in a short healthy run
        assert step["server"]["cpu_tier_pinned_max"] is not None
    html = (result.run_dir / "report.html").read_text()
    assert "Host during each step" in html and "CPU chunks pinned by transfers (max)" in html
    rebuilt = rebuild_summary(result.run_dir)  # from the files on disk alone
    assert rebuilt.arms[0].steps[0].host == type(rebuilt.arms[0].steps[0].host).model_validate(
        summary["arms"][0]["steps"][0]["host"])
