"""`harness run` end to end against the simulator: decisions, verdict exit codes, reports, failures, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from harness.run.options import RunOptions
from harness.run.orchestrator import run_rollout

EXIT_BY_VERDICT = {"go": 0, "no-go": 1, "hold": 3, "failed": 4, "slo-unmet": 5}


def _children_named(fragment: str) -> list[psutil.Process]:
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if fragment in " ".join(p.cmdline()):
                out.append(p)
        except psutil.Error:
            continue
    return out


def test_run_writes_summary_with_decisions_for_every_arm(short_scenario: Callable[..., Path], tmp_path: Path) -> None:
    scenario = short_scenario()
    result = run_rollout(scenario, RunOptions(out_dir=tmp_path / "results"), say=lambda m: None)
    assert result.run_dir is not None
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert [a["name"] for a in summary["arms"]] == ["baseline", "cpu-16g", "cpu-16g-disk"]
    assert summary["arms"][0]["decision"] == "baseline"
    for arm in summary["arms"]:
        assert arm["decision"] in {"baseline", "go", "hold", "no-go", "slo-unmet", "failed"}
        assert arm["reasons"], arm
        assert len(arm["steps"]) == 2
        for step in arm["steps"]:
            assert step["requests"] > 0
            assert step["ttft_ms"]["p99"] is not None
    assert summary["simulated"] is True
    assert result.exit_code == EXIT_BY_VERDICT[summary["verdict"]]
    spans = [json.loads(line) for line in (result.run_dir / "steps.jsonl").read_text().splitlines()]
    assert spans and all(isinstance(e.get("sim_behind_s"), float) for e in spans)  # the simulator's own lag, per step
    for name in ("report.html", "summary.md", "junit.xml", "requests.parquet", "manifest.json"):
        assert (result.run_dir / name).exists(), name
    assert not _children_named("harness.sim"), "a simulator process was left running"


def test_budget_below_achieved_makes_cpu_arm_no_go(short_scenario: Callable[..., Path], tmp_path: Path) -> None:
    # a verdict is the point: on the virtual clock (host load cannot make the steps host-contended, a hold);
    # 8 s windows are the real-time test's 2 s at its time scale 0.25
    rules = {"window_s": 8, "min_requests_per_window": 1,
             "budgets": [{"metric": "ttft", "budget_ms": 1, "breach_windows": 2, "of_last": 3, "critical": True,
                          "arms": ["cpu-16g"]}],
             "regression": [], "earns_keep": None}
    scenario = short_scenario(rules=rules, clock="virtual")
    result = run_rollout(scenario, RunOptions(out_dir=tmp_path / "results", write_reports=False), say=lambda m: None)
    assert result.summary is not None
    arms = {a.name: a for a in result.summary.arms}
    assert arms["cpu-16g"].decision == "no-go", arms["cpu-16g"].reasons
    reason = " ".join(arms["cpu-16g"].reasons)
    assert "windows" in reason and "budget" in reason
    assert result.summary.recommended_arm == "baseline"
    assert result.summary.verdict == "no-go" and result.exit_code == 1


def test_killed_server_marks_arm_failed_and_run_continues(short_scenario: Callable[..., Path],
                                                          tmp_path: Path) -> None:
    scenario = short_scenario()
    killed: list[int] = []

    def killer() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not killed:
            for p in _children_named("--kv-offloading-size"):
                time.sleep(3.0)  # let it serve a while
                p.send_signal(signal.SIGKILL)
                killed.append(p.pid)
                return
            time.sleep(0.2)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    result = run_rollout(scenario, RunOptions(out_dir=tmp_path / "results"), say=lambda m: None)
    t.join(timeout=5)
    assert killed, "the cpu arm's simulator was never seen"
    assert result.summary is not None
    arms = {a.name: a for a in result.summary.arms}
    assert arms["cpu-16g"].decision == "failed"
    assert arms["cpu-16g"].failure is not None and arms["cpu-16g"].failure.log_tail
    assert arms["cpu-16g-disk"].decision != "skipped", "the run must go on after a failed tier arm"
    # nothing recorded before the kill is lost: the cpu arm's completed requests are in requests.parquet
    import pandas as pd

    df = pd.read_parquet(result.run_dir / "requests.parquet")  # type: ignore[operator]
    assert (df["arm"] == "cpu-16g").sum() > 0


@pytest.mark.slow  # tests/reliability/test_reliability_signals.py covers SIGTERM/Ctrl-C + resume in the default suite
def test_sigint_stops_servers_and_resume_completes(short_scenario: Callable[..., Path], tmp_path: Path) -> None:
    scenario = short_scenario()
    out = tmp_path / "results"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", str(scenario), "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    assert proc.stdout is not None
    deadline = time.monotonic() + 90
    seen = False
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if "[cpu-16g] step 0" in line:
            seen = True
            time.sleep(2.0)
            started = psutil.Process(proc.pid).children(recursive=True)
            proc.send_signal(signal.SIGINT)
            break
    assert seen, "the run never reached the cpu arm"
    rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 4, rest
    assert "--resume" in rest
    assert started, "the run had no child processes"
    left = [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, f"processes left running after Ctrl-C: {left}"
    run_dirs = [d for d in out.iterdir() if d.is_dir()]
    assert len(run_dirs) == 1
    resumed = subprocess.run([sys.executable, "-m", "harness", "run", "--resume", str(run_dirs[0])],
                             check=False, capture_output=True, text=True, timeout=240, env=env)
    summary = json.loads((run_dirs[0] / "summary.json").read_text())
    assert resumed.returncode == EXIT_BY_VERDICT[summary["verdict"]], resumed.stdout + resumed.stderr
    assert [a["decision"] != "skipped" for a in summary["arms"]] == [True, True, True]
    assert any("resumed" in w for w in summary["warnings"])
