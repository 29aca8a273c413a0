"""Tier drills on the simulator, end to end: restart keeps disk hits, cache loss turns disk hits into misses without
request errors, a promotion burst reuses cold prefixes, storage pressure is applied and undone; all in the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rel_support import Progress, assert_no_new_children, child_pids, make_scenario

from harness.decision.summarize import rebuild_summary
from harness.host.labels import DISK_TIER_MARKER
from harness.run.options import RunOptions, RunResult
from harness.run.orchestrator import run_rollout
from harness.run.storage_pressure import FILLER_NAME
from harness.schema.summary import DrillResult

DRILLS: list[dict[str, Any]] = [  # cache loss last: it empties the disk tier the others read from
    {"kind": "restart", "concurrency": 4, "before_s": 0, "during_s": 1.5, "after_s": 0},
    {"kind": "promotion_burst", "concurrency": 4, "before_s": 0, "during_s": 1.0, "after_s": 0, "burst_requests": 12},
    {"kind": "storage_pressure", "concurrency": 4, "before_s": 1.0, "during_s": 1.0, "after_s": 0.5,
     "read_slowdown": 8, "fill_gib": 0.001},
    {"kind": "cache_loss", "concurrency": 4, "before_s": 1.5, "during_s": 0.5, "after_s": 0},
]


@pytest.fixture(scope="module")
def drill_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunResult, Path, Progress]:
    tmp = tmp_path_factory.mktemp("drills")
    tier = tmp / "kv-tier"
    scenario = make_scenario(tmp / "drills.yaml", tier, arms=("baseline", "cpu-16g-disk"), drills=DRILLS,
                             steps={"levels": [{"concurrency": 4, "duration_s": 2.0}]})
    progress = Progress()
    before = child_pids()
    result = run_rollout(scenario, RunOptions(out_dir=tmp / "results"), say=progress)
    assert_no_new_children(before)
    assert result.run_dir is not None and result.summary is not None, result.message
    return result, tier, progress


def _drills(result: RunResult) -> dict[str, DrillResult]:
    assert result.summary is not None
    return {d.kind: d for d in result.summary.drills}


def test_every_drill_ran_on_the_tiered_arm(drill_run: tuple[RunResult, Path, Progress]) -> None:
    result, _tier, _progress = drill_run
    drills = _drills(result)
    assert set(drills) == {"restart", "cache_loss", "promotion_burst", "storage_pressure"}
    for d in drills.values():
        assert d.arm == "cpu-16g-disk"
        assert d.status == "pass", f"{d.kind}: {d.message}"
        for phase in d.phases:
            assert phase.requests > 0, (d.kind, phase)
            assert phase.errors == 0, (d.kind, phase)
            assert phase.ttft_p99_ms is not None and phase.ttft_p99_ms > 0
            assert phase.hit_tokens.source == "server"


def test_restart_keeps_disk_hits(drill_run: tuple[RunResult, Path, Progress]) -> None:
    result, _tier, progress = drill_run
    restart = _drills(result)["restart"]
    assert [p.phase for p in restart.phases] == ["during"]
    after_restart = restart.phases[0].hit_tokens
    assert after_restart.gpu is not None and after_restart.disk is not None
    assert after_restart.disk > 0, "a warm restart with the same root_dir must find its disk tier"
    assert int(restart.details["kept_entries"] or 0) > 0
    first = restart.details["first_disk_hit_s"]
    assert isinstance(first, float) and 0 < first < 1.5 + 3.0
    assert isinstance(restart.details["warm_hit_rate"], float) and restart.details["warm_hit_rate"] > 0
    assert "first disk hit within" in restart.message
    readies = [line for line in progress.lines if line.startswith("[cpu-16g-disk] ready after")]
    assert len(readies) == 2, "the tiered arm's server was started once and restarted once"


def test_cache_loss_turns_disk_hits_into_misses_without_errors(drill_run: tuple[RunResult, Path, Progress]) -> None:
    result, tier, _progress = drill_run
    loss = _drills(result)["cache_loss"]
    by = {p.phase: p for p in loss.phases}
    assert set(by) == {"before", "during"}
    before, during = by["before"].hit_tokens, by["during"].hit_tokens
    assert before.disk is not None and during.disk is not None and before.prompt and during.prompt
    assert before.disk > 0, "the disk tier served hits before the loss"
    # The during phase starts when the deletion has finished (the simulator's segment per namespace: three entries,
    # milliseconds; ~31k chunk files took 0.4-1.1 s). Write-through refills a family's prefix with the first request
    # that recomputes it, so the phase is short (0.5 s, ~130 requests: a during / before disk-hit share of ~0.5; over
    # 4 s, ~560 requests, ~0.92, and 1.0 when nothing is deleted). The file per chunk refilled one chunk per request:
    # its in-memory index kept the deleted chunks until each was looked up, and a store skipped those.
    assert during.disk / during.prompt < 0.75 * before.disk / before.prompt, (before, during)
    took = loss.details["clear_s"]
    assert isinstance(took, float) and 0 <= took < 4.0, took
    assert f"in {took} s" in loss.message
    assert (during.miss or 0) / during.prompt > (before.miss or 0) / before.prompt
    assert by["before"].errors == by["during"].errors == 0
    assert int(loss.details["removed_entries"] or 0) > 0
    assert (tier / DISK_TIER_MARKER).is_file(), "the harness's marker is never deleted"
    assert "disk-hit tokens" in loss.message


def test_promotion_burst_and_storage_pressure(drill_run: tuple[RunResult, Path, Progress]) -> None:
    result, tier, _progress = drill_run
    drills = _drills(result)
    burst = drills["promotion_burst"]
    assert [p.phase for p in burst.phases] == ["during"]
    assert burst.phases[0].requests == 12
    promoted = (burst.phases[0].hit_tokens.cpu or 0) + (burst.phases[0].hit_tokens.disk or 0)
    assert promoted > 0, "the burst reused prefixes the cool load had pushed out of the GPU"
    assert burst.details["burst_requests"] == 12
    assert int(burst.details["cool_requests"] or 0) > 0 and burst.details["cool_errors"] == 0
    pressure = drills["storage_pressure"]
    assert [p.phase for p in pressure.phases] == ["before", "during", "after"]
    assert pressure.details["fill_bytes"] == 1 << 20 or pressure.details["fill_bytes"] == int(0.001 * (1 << 30))
    assert pressure.details["read_slowdown_applied"] == "true"
    assert not (tier / FILLER_NAME).exists(), "the filler file is removed after the drill"


def test_drills_appear_in_every_report_and_rebuild_from_files(drill_run: tuple[RunResult, Path, Progress]) -> None:
    result, _tier, _progress = drill_run
    run_dir = result.run_dir
    assert run_dir is not None
    html = (run_dir / "report.html").read_text()
    md = (run_dir / "summary.md").read_text().replace("\\", "")  # Markdown escapes underscores
    junit = (run_dir / "junit.xml").read_text()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert len(summary["drills"]) == 4
    for kind in ("cache_loss", "restart", "promotion_burst", "storage_pressure"):
        assert kind in html and kind in md and f"drill {kind}" in junit
    loss = _drills(result)["cache_loss"]
    before_disk = next(p.hit_tokens.disk for p in loss.phases if p.phase == "before")
    assert f"{before_disk:,}" in html or str(before_disk) in html
    assert "first_disk_hit_s" in html
    rebuilt = rebuild_summary(run_dir)
    assert [d.model_dump() for d in rebuilt.drills] == summary["drills"]
