"""Several load processes (locust master + local workers) and a worker joining from 'another machine'."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from load_it_helpers import step_run

from harness.config.steps import StepLevel
from harness.load import prewarm_runner, run_step
from harness.rundir.parts import build_requests_parquet
from tests.support.sim import SimHandle, running_sim


@pytest.fixture(scope="module")
def sim() -> Iterator[SimHandle]:
    prewarm_runner()
    with running_sim(profile="demo", time_scale=0.2) as handle:
        yield handle


@pytest.mark.slow
def test_two_processes_run_the_same_user_streams(sim: SimHandle, tmp_path: Path) -> None:
    closed = run_step(step_run(sim.base_url, tmp_path / "records" / "a", StepLevel(concurrency=5, duration_s=3), 0,
                               processes=2))
    assert closed.error is None and closed.errors == 0 and closed.processes == 2
    opened = run_step(step_run(sim.base_url, tmp_path / "records" / "a", StepLevel(rate_rps=6, duration_s=3), 1,
                               processes=2))
    assert opened.error is None and opened.errors == 0
    rows = pq.read_table(build_requests_parquet(tmp_path)).to_pylist()
    step0 = [r for r in rows if r["step"] == 0]
    assert {r["user"] for r in step0} == set(range(5))  # users 0..4, each once, spread over the two workers
    per_user = Counter(r["user"] for r in step0)
    for user in range(5):  # each user sent the head of its own stream, in order
        keys = sorted(int(r["request_id"].rsplit(".", 1)[1]) for r in step0 if r["user"] == user)
        assert keys == list(range(per_user[user]))
    arrivals = sorted(int(r["request_id"].rsplit("/a", 1)[1]) for r in rows if r["step"] == 1)
    assert arrivals == list(range(len(arrivals))) and len(arrivals) == opened.requests


@pytest.mark.slow
def test_a_remote_worker_joins_the_master(sim: SimHandle, tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    worker = subprocess.Popen([sys.executable, "-m", "harness.load.locust_runner", "worker", "--master-host",
                               "127.0.0.1", "--master-port", str(port)])
    try:
        out = run_step(step_run(sim.base_url, tmp_path / "records" / "a", StepLevel(concurrency=3, duration_s=2), 0,
                                remote_workers=1, master_port=port))
        assert out.error is None and out.requests >= 3 and out.errors == 0
        assert worker.wait(timeout=30) == 0  # the worker leaves when the master ends the step
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(timeout=10)
