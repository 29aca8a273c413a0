"""Hostile pass over distributed load (issue 25): remote workers whose clocks differ, that join late, that cannot
see the master's files, that report no plan fingerprint or die; worker commands pointed at something that is not a
locust master; and the layout ``harness plan`` states.

A "remote" worker runs here under ``unshare`` (root): its own mount namespace with a private ``/tmp`` (it cannot
see the master's stop file) and its own time namespace (``--monotonic``: its ``CLOCK_MONOTONIC`` offset, as another
machine's). Without ``unshare`` the clock offset is made by a wrapper that shifts ``time.perf_counter_ns`` in the
worker process, and the tests that need a private ``/tmp`` are skipped.
"""

from __future__ import annotations

import contextlib
import os
import random
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "load"))
from load_it_helpers import step_run

from harness.config.load import LoadSpec
from harness.config.steps import StepLevel
from harness.load import run_step, shutdown_runners
from harness.plan.load_layout import describe_load
from harness.rundir.attempts import counted_mask
from harness.rundir.entries import StepEntry
from tests.support.sim import SimHandle, running_sim

HARNESS = str(Path(sys.executable).with_name("harness"))
OFFSET_S = 2000


def _can_unshare() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "-T", "--monotonic", "1", "true"], check=False, capture_output=True,
                           timeout=10)
    return probe.returncode == 0


UNSHARE = _can_unshare()
needs_unshare = pytest.mark.skipif(not UNSHARE, reason="needs unshare -m -T (root): a private /tmp for the worker")

_SHIFTED = ("import sys, time; _p = time.perf_counter_ns; off = int(sys.argv.pop(1)); "
            "time.perf_counter_ns = lambda: _p() + off; "
            "from harness.load.locust_runner import main; import os; code = main(sys.argv[1:]); os._exit(code)")
_NO_FINGERPRINT = ("import sys; import harness.load.locust_runner as lr; import harness.load.worker as w; "
                   "import harness.load.worker_report as wr; wr.fingerprint = lambda plan: None; "
                   "w.fingerprint = lambda plan: None; import os; os._exit(lr.main(sys.argv[1:]))")

# a worker that registers its message handlers 1.5 s after the master acknowledged it (a busy host): what the
# master sends it at once is dropped by locust, as a stalled two-process step's rank 1 lost its set-up
_SLOW_HANDLERS = ("import sys; import harness.load.locust_runner as lr; import gevent; from locust.env import "
                  "Environment; _c = Environment.create_worker_runner\n"
                  "def slow(self, *a, **k):\n    r = _c(self, *a, **k); gevent.sleep(1.5); return r\n"
                  "Environment.create_worker_runner = slow; import os; os._exit(lr.main(sys.argv[1:]))")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _kept_under_tmp() -> list[Path]:
    """The checkout and the venv where they lie under /tmp (a CI clone): the worker must still see them."""
    tmp = Path("/tmp").resolve()
    kept: list[Path] = []
    for path in (Path(__file__).resolve().parents[2], Path(sys.prefix).resolve()):
        if path.is_relative_to(tmp) and not any(path.is_relative_to(k) for k in kept):
            kept.append(path)
    return kept


def _private_tmp() -> str:
    """Shell for the worker's mount namespace: an empty /tmp of its own (the master's step files are not there), with
    the checkout and venv mounted back where they were: held open as fds 3, 4, ... across the tmpfs mount, and bound
    with --no-canonicalize so that mount takes the held directory, not the same name on the new tmpfs."""
    kept = _kept_under_tmp()
    opens = "".join(f"exec {3 + i}<{shlex.quote(str(k))} && " for i, k in enumerate(kept))
    back = "".join(f" && mkdir -p {shlex.quote(str(k))} && mount --no-canonicalize --bind /proc/self/fd/{3 + i} "
                   f"{shlex.quote(str(k))} && exec {3 + i}<&-" for i, k in enumerate(kept))
    return f'{opens}mount -t tmpfs none /tmp{back} && exec "$@"'


def _worker(port: int, log: Path, *, offset_s: int = 0, script: str | None = None) -> subprocess.Popen[bytes]:
    """A worker 'on another machine': own /tmp and own monotonic clock (``offset_s``) where unshare works."""
    args = ["worker", "--master-host", "127.0.0.1", "--master-port", str(port), "--connect-timeout", "60"]
    if script is not None:
        cmd = [sys.executable, "-c", script, *args]
    elif offset_s and not UNSHARE:
        cmd = [sys.executable, "-c", _SHIFTED, str(offset_s * 10**9), *args]
    else:
        cmd = [sys.executable, "-m", "harness.load.locust_runner", *args]
    if UNSHARE:
        cmd = ["unshare", "-m", "-T", "--monotonic", str(offset_s), "sh", "-c", _private_tmp(), "sh", *cmd]
    with log.open("wb") as fh:
        return subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)


def _end(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def sim() -> Iterator[SimHandle]:
    with running_sim(profile="demo", time_scale=0.05) as handle:
        yield handle
    shutdown_runners()


@pytest.fixture(autouse=True)
def _stop_runners() -> Iterator[None]:
    yield
    shutdown_runners()  # before the suite's check that no process a test started outlives it


def _rows(parts: list[Path]) -> pd.DataFrame:
    return pd.concat([pq.read_table(p).to_pandas() for p in parts], ignore_index=True)


@pytest.mark.slow
def test_a_worker_whose_clock_is_2000_s_behind_has_every_row_counted(sim: SimHandle, tmp_path: Path) -> None:
    port = _free_port()
    procs = [_worker(port, tmp_path / "w0.log"), _worker(port, tmp_path / "w1.log", offset_s=-OFFSET_S)]
    try:
        out = run_step(step_run(sim.base_url, tmp_path / "rec", StepLevel(concurrency=6, requests=48), 0,
                                remote_workers=2, master_port=port, worker_wait_s=60))
    finally:
        _end(procs)
    assert out.error is None, out.error
    rows = _rows(out.parts)
    assert len(rows) == 48 and out.requests == 48
    entry = StepEntry(arm="gpu-only", step=0, start_ns=out.start_ns, end_ns=out.end_ns)
    assert counted_mask(rows, [entry]).sum() == 48, "every row of both workers is inside the master's span"
    assert out.client.layout_note and "2000.0" in out.client.layout_note, out.client.layout_note
    ttft = (rows["first_token_ns"] - rows["send_ns"]) / 1e6
    assert ttft.between(0, 10_000).all(), "durations inside a row are not changed by the shift"


@needs_unshare
@pytest.mark.slow
def test_a_sequential_look_stops_remote_workers_within_a_second(sim: SimHandle, tmp_path: Path) -> None:
    port = _free_port()
    decided: list[int] = []

    def look(elapsed: float) -> str | None:
        decided.append(time.perf_counter_ns())
        return "settled"

    procs = [_worker(port, tmp_path / "w0.log"), _worker(port, tmp_path / "w1.log")]
    try:
        out = run_step(step_run(sim.base_url, tmp_path / "rec", StepLevel(concurrency=6, duration_s=30), 0,
                                remote_workers=2, master_port=port, looks_s=[8.0], on_look=look))
    finally:
        _end(procs)
    assert out.error is None and decided, out.error
    rows = _rows(out.parts)
    assert (rows["send_ns"] < decided[0]).sum() >= 6, "the look came while the step was sending"
    late = rows[rows["send_ns"] > decided[0] + 1_000_000_000]
    assert late.empty, f"{len(late)} requests sent more than 1 s after the look's decision"
    assert out.ended_early and out.stop_reason == "settled"
    assert (out.end_ns - out.start_ns) / 1e9 < 20


@pytest.mark.slow
def test_two_local_processes_journal_a_step_that_ended_at_a_look(sim: SimHandle, tmp_path: Path) -> None:
    out = run_step(step_run(sim.base_url, tmp_path / "rec", StepLevel(concurrency=4, duration_s=30), 0,
                            processes=2, looks_s=[2.0], on_look=lambda _: "settled"))
    assert out.error is None, out.error
    assert out.ended_early and out.stop_reason == "settled"


@pytest.mark.slow
def test_a_worker_without_a_plan_fingerprint_is_refused(sim: SimHandle, tmp_path: Path) -> None:
    port = _free_port()
    procs = [_worker(port, tmp_path / "w0.log"), _worker(port, tmp_path / "w1.log", script=_NO_FINGERPRINT)]
    try:
        out = run_step(step_run(sim.base_url, tmp_path / "rec", StepLevel(concurrency=4, requests=16), 0,
                                remote_workers=2, master_port=port))
    finally:
        _end(procs)
    assert out.error is not None and "no plan fingerprint" in out.error, out.error
    assert out.requests == 0, "refused before any request was sent"
    assert out.harness_failure


@pytest.mark.slow
def test_a_worker_joining_mid_step_is_refused_and_said(sim: SimHandle, tmp_path: Path) -> None:
    port = _free_port()
    procs = [_worker(port, tmp_path / "w0.log")]
    late: list[subprocess.Popen[bytes]] = []

    def join_late() -> None:
        time.sleep(4.0)
        late.append(_worker(port, tmp_path / "late.log"))

    joiner = threading.Thread(target=join_late)
    joiner.start()
    try:
        out = run_step(step_run(sim.base_url, tmp_path / "rec", StepLevel(concurrency=4, duration_s=12), 0,
                                remote_workers=1, master_port=port))
        joiner.join()
        code = late[0].wait(timeout=30)
    finally:
        joiner.join()
        _end(procs + late)
    assert out.error is None, out.error
    assert out.processes == 1 and [p.rank for p in out.client.per_process] == [0]
    assert out.client.layout_note and "were refused" in out.client.layout_note, out.client.layout_note
    assert code == 7, "the late worker ran nothing (REFUSED)"
    rows = _rows(out.parts)
    assert set(rows["user"]) == set(range(4)) and rows["error_kind"].isna().all()


@pytest.mark.slow
def test_a_worker_that_missed_its_set_up_message_still_serves_its_share(sim: SimHandle, tmp_path: Path) -> None:
    port = _free_port()
    procs = [_worker(port, tmp_path / "w0.log"), _worker(port, tmp_path / "w1.log", script=_SLOW_HANDLERS)]
    started = time.monotonic()
    try:
        out = run_step(step_run(sim.base_url, tmp_path / "rec", StepLevel(concurrency=4, requests=16, duration_s=5),
                                0, remote_workers=2, master_port=port, drain_timeout_s=5.0))
    finally:
        _end(procs)
    assert out.error is None, out.error
    assert out.requests == 16 and sorted(p.rank for p in out.client.per_process) == [0, 1]
    assert time.monotonic() - started < 30


@pytest.mark.slow
def test_a_killed_remote_worker_is_declared_lost_within_seconds(sim: SimHandle, tmp_path: Path) -> None:
    port = _free_port()
    procs = [_worker(port, tmp_path / "w0.log"), _worker(port, tmp_path / "w1.log")]
    killed: list[float] = []

    def kill_one() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list((tmp_path / "rec").glob("*.parquet")):
            time.sleep(0.2)
        time.sleep(1.0)
        os.killpg(procs[1].pid, signal.SIGKILL)
        killed.append(time.monotonic())

    killer = threading.Thread(target=kill_one)
    killer.start()
    try:
        out = run_step(step_run(sim.base_url, tmp_path / "rec", StepLevel(concurrency=4, duration_s=40), 0,
                                remote_workers=2, master_port=port, flush_interval_s=0.5))
        ended = time.monotonic()
    finally:
        killer.join()
        _end(procs)
    assert killed and out.error is not None and "lost" in out.error, out.error
    print(f"\nthe step failed {ended - killed[0]:.1f} s after the kill: {out.error}")
    assert ended - killed[0] < 10, f"the step ended {ended - killed[0]:.1f} s after the kill"
    assert "rank" in out.error


def _serve(port_holder: list[int], stop: threading.Event, noise: bool) -> None:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(8)
        srv.settimeout(0.2)
        port_holder.append(srv.getsockname()[1])
        conns = []
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                conns.append(conn)
            except TimeoutError:
                pass
            for conn in conns:
                if noise:
                    with contextlib.suppress(OSError):
                        conn.sendall(random.randbytes(256))
        for conn in conns:
            conn.close()


@pytest.mark.parametrize("noise", [False, True], ids=["silent-port", "random-bytes"])
def test_load_worker_at_a_port_that_is_not_a_master_ends_on_its_idle_timeout(noise: bool) -> None:
    holder: list[int] = []
    stop = threading.Event()
    server = threading.Thread(target=_serve, args=(holder, stop, noise), daemon=True)
    server.start()
    while not holder:
        time.sleep(0.05)
    started = time.monotonic()
    try:
        proc = subprocess.run([HARNESS, "load-worker", "--master", f"127.0.0.1:{holder[0]}", "--idle-timeout", "10"],
                              check=False, capture_output=True, text=True, timeout=45)
    finally:
        stop.set()
        server.join(timeout=5)
    took = time.monotonic() - started
    text = proc.stdout + proc.stderr
    assert proc.returncode == 4, text
    assert took < 30, f"took {took:.0f} s with --idle-timeout 10"
    assert "Traceback" not in text and "RPC" not in text, text
    assert "is not a harness run's locust master" in text, text


def test_plan_states_no_local_process_with_remote_workers_only() -> None:
    text = describe_load(LoadSpec(remote_workers=2, master_port=5557), cores=2)
    assert "1 local process" not in text and "no local load process" in text, text
    assert "2 remote worker(s)" in text
    assert describe_load(LoadSpec(processes=2, remote_workers=3, master_port=5557, master_bind_host="0.0.0.0"),
                         cores=2).startswith("2 local processes + 3 remote worker(s) joining the master at 0.0.0.0")
    assert describe_load(LoadSpec(), cores=2) == "1 local process"
