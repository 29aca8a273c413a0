"""Proof of state and of use against the simulator: every arm records its cold start and its predicted vs measured
tier hits; an arm started on a disk tier a previous run filled (the emptying step disabled) is marked and held."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.host import disk_tier
from harness.host.labels import DISK_TIER_MARKER
from harness.run.options import RunOptions
from harness.run.orchestrator import run_rollout

ARM = "cpu-16g-disk"


def _run(scenario: Path, out: Path) -> tuple[dict[str, Any], Path]:
    result = run_rollout(scenario, RunOptions(out_dir=out, only=[ARM]), say=lambda m: None)
    assert result.run_dir is not None
    summary = json.loads((result.run_dir / "summary.json").read_text())
    return next(a for a in summary["arms"] if a["name"] == ARM), result.run_dir


def test_cold_start_then_a_warm_disk_tier_is_marked(short_scenario: Callable[..., Path], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = short_scenario()
    arm, _ = _run(scenario, tmp_path / "first")
    cold = arm["cold_start"]
    assert cold["cold"] is True, cold
    assert cold["checked"] == ["counters", "disk-tier", "probe"]
    assert cold["probe"]["cached_tokens"] == 0 and cold["probe"]["hit_tokens_delta"] == 0
    prediction = arm["hit_prediction"]
    assert prediction is not None and len(prediction["steps"]) == 2
    assert "re-derived from the request plan" in prediction["sources"][-1]
    for row in prediction["steps"]:
        for side in ("predicted", "measured"):
            assert all(row[side][s] is not None for s in ("gpu", "cpu", "disk")), row
    tier = tmp_path / "kv-tier"
    assert [p for p in tier.rglob("*") if p.is_file() and p.name != DISK_TIER_MARKER], "the first run wrote no tier"

    monkeypatch.setattr(disk_tier, "clear_contents", lambda path: 0)  # the tier is not emptied: a warm start
    arm, run_dir = _run(scenario, tmp_path / "second")
    warm = arm["cold_start"]
    assert warm["cold"] is False
    assert any("warm disk tier" in r for r in warm["reasons"]), warm
    assert arm["decision"] != "go"
    assert any(r.startswith("cold-start:") for r in arm["reasons"]), arm["reasons"]
    assert "NOT A COLD START" in (run_dir / "report.html").read_text()
