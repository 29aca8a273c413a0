"""SIGTERM (to the harness) and SIGINT (Ctrl-C, to its whole process group) during a step: every server and load
process stops, the records of the interrupted step are on disk, the journals stay whole, and ``--resume`` completes
the run, counting the step once."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import psutil
import pyarrow.parquet as pq

from harness.rundir import journal

EXIT_BY_VERDICT = {"go": 0, "no-go": 1, "hold": 3, "failed": 4, "slo-unmet": 5}
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "400"}  # no wrapped progress lines
READY = re.compile(r"ready after [0-9.]+ s at (?P<url>http://[0-9.:]+)")


def _start(args: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "harness", "run", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=ENV, text=True, start_new_session=True)


def _finished_requests(url: str) -> int:
    try:
        state = httpx.get(url + "/admin/state", timeout=2.0, trust_env=False).json()
    except (httpx.HTTPError, ValueError):
        return 0
    return int(state["stats"]["finished"]["length"])


def read_to_step(proc: subprocess.Popen[str], marker: str, requests: int,
                 deadline: float) -> tuple[list[str], str, bool]:
    """Read the run's output (until ``deadline``, a monotonic time) up to the line holding ``marker``, then wait until
    the server has finished ``requests`` requests; returns the lines read, the server's URL (from its ready line,
    "" if none came) and whether ``marker`` was seen."""
    assert proc.stdout is not None
    seen: list[str] = []
    url = ""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            return seen, url, False
        seen.append(line)
        m = READY.search(line)
        if m:
            url = m["url"]
        if marker in line:
            while url and _finished_requests(url) < requests and time.monotonic() < deadline:
                time.sleep(0.1)
            return seen, url, True
    return seen, url, False


def _interrupt_at(proc: subprocess.Popen[str], marker: str, sig: signal.Signals, group: bool) -> tuple[str, list[int]]:
    """Wait (bounded) for a progress line, then until the server has finished a few of the step's requests, and
    send the signal; returns the output and the pids the run had started."""
    seen, url, found = read_to_step(proc, marker, 3, time.monotonic() + 90)
    pids: list[int] = []
    if found:
        assert url, "no ready line before the step"
        pids = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
        if group:
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)
    assert pids, f"never saw {marker!r} (or the run had no child processes):\n{''.join(seen)}"
    rest, _ = proc.communicate(timeout=60)
    return "".join(seen) + rest, pids


def _alive(pid: int) -> bool:
    try:
        p = psutil.Process(pid)
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _check_stopped(proc: subprocess.Popen[str], output: str, pids: list[int], run_dir: Path, arm: str) -> None:
    assert proc.returncode == 4, output
    assert "Traceback" not in output, output
    assert f"harness run --resume {run_dir}" in output.replace("\n", "")
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if _alive(p)], "a server or load process outlived the interrupted run"
    parts = sorted((run_dir / "records" / arm).glob("part-s000-*.parquet"))
    assert parts, f"the interrupted step's records of {arm} were not flushed"
    assert sum(pq.read_metadata(p).num_rows for p in parts) > 0
    for name in ("steps.jsonl", "arms.jsonl"):
        if not (run_dir / name).exists():  # no step had completed yet
            continue
        for line in (run_dir / name).read_text().splitlines():
            json.loads(line)  # every line whole
    events = [e for e in journal.read(run_dir / "arms.jsonl") if e["arm"] == arm]
    assert events[-1]["event"] == "interrupted"


def test_sigterm_then_ctrl_c_then_resume_completes(scenario: Callable[..., Path], tmp_path: Path) -> None:
    path = scenario("signals", arms=("baseline",), steps={"levels": [{"concurrency": 4, "duration_s": 3}]})
    out = tmp_path / "results"

    proc = _start([str(path), "--out", str(out)])
    output, pids = _interrupt_at(proc, "[baseline] step 0", signal.SIGTERM, group=False)
    run_dir = next(d for d in out.iterdir() if d.is_dir())
    _check_stopped(proc, output, pids, run_dir, "baseline")
    first_parts = set((run_dir / "records" / "baseline").glob("part-*.parquet"))

    proc = _start(["--resume", str(run_dir)])
    output, pids = _interrupt_at(proc, "[baseline] step 0", signal.SIGINT, group=True)
    _check_stopped(proc, output, pids, run_dir, "baseline")
    assert set((run_dir / "records" / "baseline").glob("part-*.parquet")) > first_parts, "both attempts' records kept"

    done = subprocess.run([sys.executable, "-m", "harness", "run", "--resume", str(run_dir)], capture_output=True,
                          text=True, timeout=180, env=ENV, check=False)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert done.returncode == EXIT_BY_VERDICT[summary["verdict"]], done.stdout + done.stderr
    assert summary["arms"][0]["decision"] == "baseline" and summary["arms"][0]["failure"] is None
    assert sum("resumed" in w for w in summary["warnings"]) == 1
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert len(manifest["resumed"]) == 2
    spans = [e for e in journal.read(run_dir / "steps.jsonl") if e["step"] >= 0]
    assert len(spans) == 1, f"the step is journaled once, when it completed: {spans}"
    step = summary["arms"][0]["steps"][0]
    assert step["requests"] == spans[0]["requests"] > 0, "requests of the interrupted attempts are not counted"
