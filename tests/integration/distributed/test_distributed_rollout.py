"""Distributed load from the scenario: a rollout on the simulator with ``load.processes: 2``, one with two
``harness load-worker`` processes (started and stopped here, on 127.0.0.1) as remote workers, and the
one-process run: the same plan fingerprint, every planned request in requests.parquet, and the median TTFT error
against the simulator's ground truth within the one-process figure. ``processes: auto`` grows after a step the
client-health check marked saturated (forced with a send-lag limit of 0)."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "reliability"))
from rel_support import make_scenario

from harness.config import load_scenario
from harness.run.options import RunOptions
from harness.run.orchestrator import run_rollout
from harness.run.ports import free_port
from harness.sim.groundtruth import read_ground_truth
from harness.workload.plan import build_request_plan

LEVELS = [{"concurrency": 4, "requests": 24}, {"concurrency": 6, "requests": 30}]
HARNESS = str(Path(sys.executable).with_name("harness"))
TTFT_SLACK_MS = 1.0  # scheduling jitter of a 2-core host shared with other jobs


def _scenario(tmp: Path, name: str, load: dict[str, Any], levels: list[dict[str, Any]]) -> Path:
    return make_scenario(tmp / f"{name}.yaml", tmp / f"{name}-kv", arms=("baseline",),
                         steps={"levels": levels}, load=load,
                         engine={"sim_args": ["--ground-truth", str(tmp / f"{name}-truth.jsonl")]})


def _run(path: Path, out: Path, *, reports: bool = False) -> tuple[Path, list[str]]:
    lines: list[str] = []
    result = run_rollout(path, RunOptions(out_dir=out, write_reports=reports), say=lines.append)
    assert result.run_dir is not None, result.message
    assert result.exit_code in (0, 3), (result.exit_code, result.message, lines[-5:])  # go or hold: never 1 or 4
    return result.run_dir, lines


def _steps(run_dir: Path) -> list[dict[str, Any]]:
    entries = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines() if line.strip()]
    return [e for e in entries if int(e["step"]) >= 0 and not e.get("drill")]


def _planned_ids(path: Path, index: int) -> set[str]:
    scenario = load_scenario(path)
    level = scenario.steps.levels[index]
    plan = build_request_plan(scenario.workload, level, step_index=index)
    ids = set()
    for user in range(plan.users):
        quota = plan.user_quota(user)
        ids |= {f"baseline/{plan.tag}/{req.key}" for req in itertools.islice(plan.user_stream(user), quota)}
    return ids


def _ttft_error_ms(run_dir: Path, truth_path: Path) -> float:
    truth = {t["request_id"]: t for t in read_ground_truth(truth_path)}
    rows = pq.read_table(run_dir / "requests.parquet").to_pylist()
    errors = [abs(r["first_token_ns"] - truth[r["response_id"]]["first_token_sent_ns"]) / 1e6 for r in rows
              if r["first_token_ns"] and truth.get(r["response_id"], {}).get("first_token_sent_ns")]
    assert len(errors) == len(rows), "every request has a first token and a ground-truth line"
    return statistics.median(errors)


def _check_run(run_dir: Path, path: Path, levels: list[dict[str, Any]], processes: int,
               remote: int) -> list[str]:
    rows = pq.read_table(run_dir / "requests.parquet").to_pylist()
    steps = _steps(run_dir)
    assert [e["step"] for e in steps] == list(range(len(levels)))
    fingerprints = []
    for index, entry in enumerate(steps):
        client = entry["client"]
        assert client["processes"] == processes and client["remote_processes"] == remote, client
        assert len(client["per_process"]) == processes and client["machines"] == 1
        assert sum(p["requests"] for p in client["per_process"]) == levels[index]["requests"]
        ids = {r["request_id"] for r in rows if r["step"] == index}
        assert ids == _planned_ids(path, index), "every planned request is in requests.parquet, nothing else"
        assert entry["requests"] == levels[index]["requests"] and entry["errors"] == 0
        fingerprints.append(client["plan_fingerprint"])
    assert all(fingerprints)
    return fingerprints


def _start_workers(port: int, n: int, log_dir: Path) -> list[tuple[subprocess.Popen[bytes], Path]]:
    out = []
    for i in range(n):
        log = log_dir / f"load-worker-{i}.log"
        with log.open("wb") as fh:
            proc = subprocess.Popen([HARNESS, "load-worker", "--master", f"127.0.0.1:{port}", "--idle-timeout", "60"],
                                    stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        out.append((proc, log))
    return out


def _stop(workers: list[tuple[subprocess.Popen[bytes], Path]]) -> None:
    for proc, _ in workers:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _three_runs(tmp_path: Path, levels: list[dict[str, Any]]) -> None:
    out = tmp_path / "results"
    one = _scenario(tmp_path, "one", {}, levels)
    two = _scenario(tmp_path, "two", {"processes": 2}, levels)
    port = free_port()
    remote = _scenario(tmp_path, "remote", {"remote_workers": 2, "master_port": port, "worker_wait_s": 30}, levels)
    run_one, _ = _run(one, out)
    run_two, lines_two = _run(two, out)
    assert any("from 2 load processes on 1 machine(s)" in line for line in lines_two)
    workers = _start_workers(port, 2, tmp_path)
    try:
        run_remote, _ = _run(remote, out, reports=True)
        codes = [proc.wait(timeout=30) for proc, _ in workers]  # the run's end tells them it is over
    finally:
        _stop(workers)
    logs = [log.read_text() for _, log in workers]
    assert codes == [0, 0], logs
    assert all("the master says the run is over; served 2 step(s)" in text for text in logs), logs
    fp_one = _check_run(run_one, one, levels, 1, 0)
    fp_two = _check_run(run_two, two, levels, 2, 0)
    fp_remote = _check_run(run_remote, remote, levels, 2, 2)
    assert fp_one == fp_two == fp_remote
    errors = {name: _ttft_error_ms(run, tmp_path / f"{name}-truth.jsonl")
              for name, run in (("one", run_one), ("two", run_two), ("remote", run_remote))}
    print(f"\nmedian |client TTFT - simulator first-token send| (ms): 1 process {errors['one']:.3f}, "
          f"2 processes {errors['two']:.3f}, 2 remote load-workers {errors['remote']:.3f}")
    for name in ("two", "remote"):
        assert errors[name] <= errors["one"] + TTFT_SLACK_MS, errors
    summary = json.loads((run_remote / "summary.json").read_text())
    client = summary["arms"][0]["steps"][0]["client"]
    assert client["processes"] == 2 and client["remote_processes"] == 2
    assert all(p["remote"] and p["cpu_percent"] is not None for p in client["per_process"])
    assert "2 process(es) on 1 machine(s) (2 remote)" in (run_remote / "summary.md").read_text()
    assert 'id="load-layout-baseline"' in (run_remote / "report.html").read_text()


def test_two_processes_and_two_load_workers_run_the_one_process_plan(tmp_path: Path) -> None:
    _three_runs(tmp_path, LEVELS)


@pytest.mark.slow
def test_distributed_runs_at_higher_load_match_the_one_process_run(tmp_path: Path) -> None:
    _three_runs(tmp_path, [{"concurrency": 16, "requests": 320}, {"concurrency": 32, "requests": 640}])


def test_auto_adds_a_process_after_a_saturated_step(tmp_path: Path) -> None:
    path = _scenario(tmp_path, "auto", {"processes": "auto", "max_processes": 2, "saturation_lag_ms": 0}, LEVELS)
    started = time.monotonic()
    run_dir, lines = _run(path, tmp_path / "results")
    steps = _steps(run_dir)
    assert [e["client"]["processes"] for e in steps] == [1, 2]
    assert steps[0]["client"]["saturated"] and steps[0]["client"]["layout_note"] is None
    assert steps[1]["client"]["layout_note"] == "raised from 1 to 2 processes after step 0 (c4) was saturated"
    said = [line for line in lines if "the next step uses 2" in line]
    assert said == ["[baseline] load generator saturated at step 0 (c4) with 1 process(es): the next step uses 2 "
                    "(load.processes: auto, at most 2)"]
    assert any("at the most" in line or "the most load.processes: auto allows" in line for line in lines)
    assert time.monotonic() - started < 120
