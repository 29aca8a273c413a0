"""Steps that must end by themselves: Ctrl-C, a dead server, stalled streams, bad input; and paired arms."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from load_it_helpers import step_run

from harness.config.steps import StepLevel
from harness.load import prewarm_runner, run_step
from harness.rundir.parts import build_requests_parquet, find_parts
from harness.workload.plan import LoadConfigError
from tests.support.sim import SimHandle, running_sim


@pytest.fixture(scope="module")
def stalling_sim() -> Iterator[SimHandle]:
    prewarm_runner()
    with running_sim(profile="demo", time_scale=0.2, stall_after_tokens=5) as handle:
        yield handle


def test_cancel_returns_promptly_with_records_flushed(stalling_sim: SimHandle, tmp_path: Path) -> None:
    cancel = threading.Event()
    records = tmp_path / "records" / "a"

    def cancel_once_records_exist() -> None:  # Ctrl-C in the middle of the step
        for _ in range(600):
            if find_parts(records) or cancel.is_set():
                break
            time.sleep(0.1)
        cancel.set()

    watcher = threading.Thread(target=cancel_once_records_exist)
    watcher.start()
    req = step_run(stalling_sim.base_url, records, StepLevel(concurrency=3, duration_s=60), 0,
                   stream_idle_timeout_s=1.0, flush_interval_s=0.5)
    t0 = time.monotonic()
    out = run_step(req, cancel)
    elapsed = time.monotonic() - t0
    cancel.set()
    watcher.join()
    assert elapsed < 40.0
    assert out.interrupted and out.error is None
    rows = pq.read_table(build_requests_parquet(tmp_path)).to_pylist()
    assert rows and len(rows) == out.requests
    kinds = {r["error_kind"] for r in rows}
    assert "stalled" in kinds  # the simulator stops after 5 tokens; the 1 s idle timeout ends each stream
    assert kinds <= {"stalled", "cancelled"}
    assert all(len(r["chunk_ns"]) == 5 for r in rows if r["error_kind"] == "stalled")


def test_a_dead_server_ends_the_step_early(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    out = run_step(step_run(f"http://127.0.0.1:{port}", tmp_path / "r", StepLevel(concurrency=2, duration_s=60), 0))
    assert time.monotonic() - t0 < 25.0
    assert out.error is not None and out.error.startswith("server unreachable")
    assert out.errors == out.requests and out.errors_by_kind.get("connection", 0) >= 5
    assert out.errors_by_kind.keys() <= {"connection", "cancelled"}  # one may be connecting when it ends
    assert find_parts(tmp_path / "r")


def test_bad_input_raises_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(LoadConfigError, match="unknown request class"):
        run_step(step_run("http://127.0.0.1:9", tmp_path, StepLevel(concurrency=1, duration_s=1), 0,
                          classes=["huge"]))
    with pytest.raises(LoadConfigError, match="max_model_len 1024"):
        run_step(step_run("http://127.0.0.1:9", tmp_path, StepLevel(concurrency=1, duration_s=1), 0,
                          max_model_len=1024))


def test_ctrl_c_in_the_calling_thread_stops_the_step_then_propagates(stalling_sim: SimHandle,
                                                                     tmp_path: Path) -> None:
    import _thread

    import httpx

    records = tmp_path / "records"

    pressed: list[float] = []

    def press_ctrl_c() -> None:  # once the simulator holds streams open (bounded: ~30 s of polling)
        deadline = time.monotonic() + 30.0
        while time.monotonic() < deadline:
            try:
                metrics = httpx.get(stalling_sim.base_url + "/metrics", timeout=5).text
            except httpx.HTTPError:  # a slow answer on a loaded host: ask again
                metrics = ""
            running = [line for line in metrics.splitlines() if line.startswith("vllm:num_requests_running")]
            if running and float(running[0].rsplit(" ", 1)[1]) >= 1:
                break
            time.sleep(0.1)
        time.sleep(0.5)
        pressed.append(time.monotonic())
        _thread.interrupt_main()

    presser = threading.Thread(target=press_ctrl_c)
    presser.start()
    with pytest.raises(KeyboardInterrupt):
        run_step(step_run(stalling_sim.base_url, records, StepLevel(concurrency=2, duration_s=60), 1,
                          stream_idle_timeout_s=30.0, flush_interval_s=0.5))
    presser.join()
    assert pressed and time.monotonic() - pressed[0] < 20.0  # stopped soon after Ctrl-C, not at the step's 60 s
    rows = pq.read_table(build_requests_parquet(tmp_path)).to_pylist()
    assert rows and all(r["error_kind"] == "cancelled" for r in rows)  # the stalled streams, cut by Ctrl-C
