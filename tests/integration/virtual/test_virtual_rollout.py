"""Whole rollouts on the virtual clock: deterministic, with drills and a rate level, and the same run directory."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from pathlib import Path

from virtual_run_helpers import without_wall_clock

from harness.host.facts import FakeHostFacts
from harness.run.options import RunOptions
from harness.run.orchestrator import run_rollout
from harness.rundir import journal
from harness.rundir.layout import RunDir
from harness.rundir.parts import find_parts, read_parts
from harness.scrape.rawlog import read_raw_scrapes

SHORT = {
    "steps": {"warmup": {"duration_s": 1, "concurrency": 2},
              "levels": [{"rate_rps": 15, "duration_s": 3}, {"rate_rps": 30, "duration_s": 3}],
              "sequential": {"enabled": False}},
    "drills": [{"kind": "restart", "concurrency": 4, "before_s": 1, "during_s": 2, "after_s": 1},
               {"kind": "cache_loss", "concurrency": 4, "before_s": 1, "during_s": 1, "after_s": 1}],
}


def _run(path: Path, out: Path) -> tuple[int, Path]:
    # the pre-flight checks read the host (memory available now): fixed facts, so that only the clock could differ
    result = run_rollout(path, RunOptions(out_dir=out, virtual=True, write_reports=False, host=FakeHostFacts()),
                         say=lambda _m: None)
    assert result.run_dir is not None, result.message
    return result.exit_code, result.run_dir


def test_two_runs_give_the_same_summary_and_the_run_directory_is_whole(
        virtual_scenario: Callable[..., Path], tmp_path: Path) -> None:
    path = virtual_scenario(**SHORT)
    started = time.monotonic()
    code_a, run_a = _run(path, tmp_path / "a")
    first_s = time.monotonic() - started
    code_b, run_b = _run(path, tmp_path / "b")
    summary_a = json.loads((run_a / "summary.json").read_text())
    summary_b = json.loads((run_b / "summary.json").read_text())
    assert code_a == code_b == summary_a["exit_code"]
    assert without_wall_clock(summary_a) == without_wall_clock(summary_b)
    assert first_s < 120  # minutes of modelled load in seconds (a loose bound: CI hosts vary)

    manifest = json.loads((run_a / "manifest.json").read_text())
    assert manifest["clock"] == "virtual" and manifest["simulated"] is True
    assert {launch["identity"]["launcher"] for launch in manifest["launches"]} == {"virtual"}
    run = RunDir(run_a)
    steps = journal.read_step_entries(run)
    rate = [e for e in steps if e.rate_rps == 30]
    assert rate and all(e.sim_behind_s == 0.0 for e in steps if not e.drill)
    # one virtual clock: arms, steps and drill phases follow each other without overlap
    spans = sorted((e.start_ns, e.end_ns) for e in steps)
    assert all(a_end <= b_start for (_a, a_end), (b_start, _b) in itertools.pairwise(spans))
    for entry in (e for e in steps if not e.drill):  # every record of a step lies inside its journaled span
        table, _ = read_parts(find_parts(run.records_dir(entry.arm)))
        rows = [r for r in table.to_pylist() if r["step"] == entry.step]
        assert len(rows) == entry.requests > 0
        assert all(entry.start_ns <= r["send_ns"] and r["end_ns"] <= entry.end_ns for r in rows)
    scrapes, notes = read_raw_scrapes(run.metrics_dir("cpu-16g-disk") / "scrapes.jsonl.gz")
    assert not notes and all(s["status"] == 200 and "vllm:kv_offload_tiering_chunk_hits" in s["body"]
                             for s in scrapes)
    tags = [s["tag"] for s in scrapes]
    assert "step-0-start" in tags and "drill-0-ready" in tags and tags.count("drill-0-watch") > 10
    monos = [s["mono_ns"] for s in scrapes]
    assert monos == sorted(monos)

    drills = {d["kind"]: d for d in summary_a["drills"]}
    assert drills["restart"]["status"] == "pass" and "restarted in 0.0 s" in drills["restart"]["message"]
    assert drills["restart"]["details"]["kept_entries"] not in (None, 0, "0")
    loss = drills["cache_loss"]
    phases = {p["phase"]: p for p in loss["phases"]}
    assert loss["status"] == "pass" and phases["during"]["hit_tokens"]["disk"] == 0  # the disk tier was lost
    assert not (tmp_path / "kv-tier").exists()  # the configured disk-tier directory was never touched


def test_sequential_looks_end_a_tier_step_early_on_virtual_time(virtual_scenario: Callable[..., Path],
                                                                tmp_path: Path) -> None:
    path = virtual_scenario(arms=[{"name": "baseline", "tier": "gpu-only"},
                                  {"name": "cpu-16g", "tier": "cpu",
                                   "offload": {"kind": "vllm-native", "kv_offloading_size_gib": 16}}],
                            steps={"levels": [{"concurrency": 32, "duration_s": 16}]}, drills=[],
                            rules={"noise_floor": {"rerun_baseline": False}})
    code, run_dir = _run(path, tmp_path / "out")
    entries = {e.arm: e for e in journal.read_step_entries(RunDir(run_dir)) if e.step == 0}
    tier = entries["cpu-16g"]
    assert tier.ended_early and tier.stop_reason, tier
    looked = float(tier.stop_reason.split("settled at ")[1].split(" s")[0])
    assert looked in (4.0, 8.0, 12.0)  # a look at its virtual time (steps.sequential: 4 looks over 16 s)
    assert looked <= (tier.end_ns - tier.start_ns) / 1e9 < 16.0  # sending ended at that look, then it drained
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["load_time"]["steps_ended_early"] >= 1 and code == summary["exit_code"]
