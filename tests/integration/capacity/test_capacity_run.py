"""Capacity at SLO on the demo's simulator: `harness run` with `steps.search` finds a higher capacity for the CPU tier
than for the baseline, journals every probe, reports the probes with their intervals, and `harness report` rebuilds
it; a budget nobody meets says so; the verdict is the same with and without the search.

The physics decides: at 64 users the GPU-only baseline's KV cache (~24k tokens) cannot hold the shared prefixes
and recomputes them, while the CPU tier serves them from host memory. Which loads meet the budget is the point, so
the rollouts run on the virtual clock (``engine.sim_clock: virtual``, ``sim_time_scale`` 1.0: deterministic,
whatever the host's load): the budget (1.8 s) and every duration are in modelled seconds, four times the figures of
the real-time version, which ran 4x faster than modelled time (450 ms measured, 1.5 s steps, 4 s probes).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.decision.summarize import rebuild_summary

DEMO = Path(__file__).resolve().parents[3] / "scenarios" / "demo-sim.yaml"
BUDGET_MS = 1800.0


def scenario(path: Path, search: dict[str, Any], *, levels: list[dict[str, Any]] | None = None) -> Path:
    """The demo's baseline and CPU tier, shortened: no drills, no A/A re-run, one short fixed step, the search."""
    data = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    data["name"] = path.stem
    data["engine"].pop("sim_noise", None)
    data["engine"].update({"sim_clock": "virtual", "sim_time_scale": 1.0, "readiness_timeout_s": 30})
    data["arms"] = [a for a in data["arms"] if a["name"] in ("baseline", "cpu-16g")]
    data.pop("drills", None)
    data["rules"]["noise_floor"] = {"rerun_baseline": False}
    data["steps"] = {"warmup": {"duration_s": 4, "concurrency": 4},
                     "levels": levels or [{"concurrency": 4, "duration_s": 6}],
                     "scrape_interval_s": 2, "stream_idle_timeout_s": 40, "drain_timeout_s": 12,
                     "request_timeout_s": 240, "search": search}
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def harness(*args: str, state: Path, timeout_s: float = 240) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HARNESS_STATE_DIR": str(state)}
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, env=env,
                          timeout=timeout_s, check=False)


def run_dir(out: Path) -> Path:
    dirs = [p for p in out.iterdir() if p.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def summary(path: Path) -> dict[str, Any]:
    return dict(json.loads((path / "summary.json").read_text(encoding="utf-8")))


def with_scenario(src: Path, dest: Path, change: Any) -> Path:
    """A copy of a run directory whose scenario.yaml ``change`` edited (to rebuild the same records otherwise)."""
    shutil.copytree(src, dest)
    data = yaml.safe_load((dest / "scenario.yaml").read_text(encoding="utf-8"))
    change(data)
    (dest / "scenario.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return dest


def probe_rows(arm: dict[str, Any]) -> list[tuple[float, str]]:
    return [(p["load"], p["outcome"]) for p in arm["probes"]]


def test_cpu_tier_holds_more_users_than_the_baseline_at_the_slo(tmp_path: Path) -> None:
    search = {"metric": "ttft", "percentile": 99, "budget_ms": BUDGET_MS, "low": 32, "high": 64,
              "resolution": "100%", "probe_duration_s": 16, "extend_factor": 1.5, "max_probes": 4}
    path = scenario(tmp_path / "capacity.yaml", search)
    out, state = tmp_path / "results", tmp_path / "state"
    done = harness("run", str(path), "--out", str(out), state=state)
    assert "Traceback" not in done.stderr + done.stdout
    run = run_dir(out)
    s = summary(run)
    assert done.returncode == s["exit_code"] and done.returncode in (0, 1, 3, 5), done.stderr[-2000:]

    cap = s["capacity"]
    base, cpu = cap["arms"]
    assert (base["arm"], cpu["arm"]) == ("baseline", "cpu-16g")
    # The baseline meets at 32 users and breaks at 64; the CPU tier meets at 64 (the top of the range).
    assert base["status"] == "found" and base["capacity"] == 32 and base["not_met"] == 64, base["message"]
    assert cpu["status"] == "at-least-high" and cpu["capacity"] == 64, cpu["message"]
    assert cap["comparison"] == [
        "the CPU tier (cpu-16g) holds at least 64 users at p99 TTFT ≤ 1.8 s; the baseline 32 users — more "
        "(2.00x): it met 64 users, where the baseline did not meet 64 users"]
    for arm in (base, cpu):
        for probe in arm["probes"]:
            ci = probe["ci"]
            assert probe["requests"] > 0 and probe["n"] == ci["n"] > 0
            if probe["outcome"] == "meets":
                assert ci["hi"] is not None and ci["hi"] <= BUDGET_MS
            elif probe["outcome"] == "breaks":
                assert ci["lo"] is not None and ci["lo"] > BUDGET_MS
            assert ci["lo"] is None or ci["hi"] is None or ci["lo"] <= probe["value_ms"] <= ci["hi"]
    bad = next(p for p in base["probes"] if p["load"] == 64)
    assert bad["outcome"] == "breaks" and bad["ci"]["lo"] > BUDGET_MS

    # Every probe is a journaled step below the warm-up and drill indices, with its search session and load.
    entries = [json.loads(line) for line in (run / "steps.jsonl").read_text(encoding="utf-8").splitlines()]
    probes = [e for e in entries if e.get("search")]
    assert len(probes) == len(base["probes"]) + len(cpu["probes"])
    assert all(e["step"] <= -1000 and e["label"].startswith("search-c") for e in probes)
    assert all(step["index"] >= 0 for arm in s["arms"] for step in arm["steps"])  # fixed steps untouched
    assert [len(arm["steps"]) for arm in s["arms"]] == [1, 1]

    html = (run / "report.html").read_text(encoding="utf-8")
    md = (run / "summary.md").read_text(encoding="utf-8")
    assert 'id="capacity"' in html and 'id="capacity-probes-baseline"' in html
    assert 'id="chart-capacity-figure"' in html and "<svg" in html
    assert "holds at least 64 users at p99 TTFT ≤ 1.8 s" in html
    assert "### Capacity at SLO (p99 TTFT ≤ 1,800 ms)" in md and "| baseline | 2 | search-c64 |" in md

    # `harness report RUN_DIR` rebuilds the same capacity from the journal and the records.
    again = with_scenario(run, tmp_path / "again", lambda d: None)
    (again / "summary.json").unlink()
    rebuilt = harness("report", str(again), state=state, timeout_s=120)
    assert rebuilt.returncode == 0, rebuilt.stderr[-2000:]
    assert summary(again)["capacity"] == cap

    # A budget nobody meets says so, with the lowest load's interval (the same probes, rebuilt in process).
    tight = with_scenario(run, tmp_path / "tight", lambda d: d["steps"]["search"].update(budget_ms=5))
    none = rebuild_summary(tight).model_dump(mode="json")["capacity"]
    assert [a["status"] for a in none["arms"]] == ["none-met", "none-met"]
    lowest = next(p for p in none["arms"][0]["probes"] if p["load"] == 32)
    assert none["arms"][0]["message"].startswith(
        "baseline: no probed load met p99 TTFT ≤ 5 ms; the lowest, 32 users, had p99 ")
    assert f"{lowest['ci']['lo']:.0f} ms" in none["arms"][0]["message"]

    # The capacity informs; it does not change the verdict: without the search, the same decisions.
    without = rebuild_summary(with_scenario(run, tmp_path / "plain", lambda d: d["steps"].pop("search"))
                              ).model_dump(mode="json")
    assert without["capacity"] is None
    assert (without["verdict"], [a["decision"] for a in without["arms"]]) == \
        (s["verdict"], [a["decision"] for a in s["arms"]])


@pytest.mark.slow
def test_fuller_search_and_a_budget_nobody_meets_in_a_real_run(tmp_path: Path) -> None:
    """A finer search (4 to 128 users, resolution 8) and, in a second run, a budget no load meets: each arm runs
    one probe at the lowest load and says so."""
    search = {"metric": "ttft", "percentile": 99, "budget_ms": 2000, "low": 4, "high": 128, "resolution": 8,
              "probe_duration_s": 20, "max_probes": 10}
    out, state = tmp_path / "results", tmp_path / "state"
    done = harness("run", str(scenario(tmp_path / "fuller.yaml", search)), "--out", str(out), state=state,
                   timeout_s=600)
    assert "Traceback" not in done.stderr + done.stdout
    base, cpu = summary(run_dir(out))["capacity"]["arms"]
    assert base["capacity"] is not None and cpu["capacity"] is not None
    assert cpu["capacity"] > base["capacity"], (base["message"], cpu["message"])

    out2 = tmp_path / "results-none"
    tight = {**search, "budget_ms": 5, "max_probes": 3}
    done = harness("run", str(scenario(tmp_path / "none.yaml", tight)), "--out", str(out2), state=state)
    assert "Traceback" not in done.stderr + done.stdout
    cap = summary(run_dir(out2))["capacity"]
    for arm in cap["arms"]:
        assert arm["status"] == "none-met" and probe_rows(arm)[0] == (4.0, "breaks"), arm["message"]
        assert len(arm["probes"]) == 1
        assert "no probed load met p99 TTFT ≤ 5 ms; the lowest, 4 users, had p99" in arm["message"]
