"""Resume that is honest (issue 17, item 3 and the double SIGINT of item 13).

* A results disk that fills up during an arm (a 4 KiB tmpfs over the arm's record directory as root; elsewhere ENOSPC
  injected into the step journal's writes): the arm is journaled ``failed`` with ``cause: harness``, the run stops
  with exit 4, the verdict blames no tier, and ``--resume`` (once there is room) redoes the arm and judges it.
* SIGINT mid-step, then ``--resume``: ``requests.parquet`` keeps both attempts' rows, told apart by ``attempt`` (the
  abandoned one marked ``superseded``), and the summary counts only the completed attempt's rows.
* Two SIGINTs in quick succession: "second interrupt: forced stop ...", the arm journaled ``interrupted``, no process
  left, exit 4 (as the README and docs/reliability.md promise for interrupts).
* Crafted journals and parts from before attempts and causes existed read as attempt 1 / cause server.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rel_support import Progress
from test_reliability_signals import ENV, EXIT_BY_VERDICT, _alive, read_to_step

from harness.decision.summarize import rebuild_summary
from harness.run.options import RunOptions
from harness.run.orchestrator import run_rollout
from harness.run.signals import ForcedStop, cancel_on_signals
from harness.rundir import journal
from harness.rundir.attempts import counted_mask, superseded_mask
from harness.rundir.entries import ArmEvent, StepEntry
from harness.rundir.journal import read_arm_events
from harness.rundir.layout import RunDir
from harness.rundir.parts import read_parts
from harness.rundir.records import SCHEMA
from harness.rundir.resume import failure_cause, finished_arms, next_attempt

RUN_LIMIT_S = 90.0  # one fast run on a busy 2-core host (measured: 6-15 s)


def _events(run_dir: Path, arm: str) -> list[dict[str, object]]:
    return [e for e in journal.read(run_dir / "arms.jsonl") if e["arm"] == arm]


@contextlib.contextmanager
def _full_disk_during(progress: Progress, out: Path, arm: str) -> Iterator[list[str]]:
    """When ``arm`` starts, its results stop fitting: a 4 KiB tmpfs over its record directory (root), else ENOSPC
    from every write to ``steps.jsonl``. Yields the mode; space is back when the block ends."""
    mode: list[str] = []
    mounted: list[Path] = []
    real_write = os.write

    def full(fd: int, data: bytes) -> int:
        if mode == ["journal"] and os.readlink(f"/proc/self/fd/{fd}").endswith("steps.jsonl"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    def fill(_line: str, _p: Progress) -> None:
        records = next(d for d in out.iterdir() if d.is_dir()) / "records" / arm
        records.mkdir(parents=True, exist_ok=True)
        mount = shutil.which("mount")
        if os.geteuid() == 0 and mount and not os.environ.get("HARNESS_TEST_NO_TMPFS") and subprocess.run(
                [mount, "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(records)], capture_output=True, timeout=10,
                check=False).returncode == 0:
            mounted.append(records)
            mode.append("tmpfs")
        else:
            mode.append("journal")

    progress.on(rf"^\[{arm}\] starting ", fill)
    os.write = full  # type: ignore[assignment]  # only bites once fill() chose "journal"
    try:
        yield mode
    finally:
        os.write = real_write
        mode[:] = ["freed"]
        for where in mounted:
            subprocess.run(["umount", str(where)], capture_output=True, timeout=10, check=False)


def test_results_disk_full_during_an_arm_then_resume_redoes_and_judges_it(scenario: Callable[..., Path],
                                                                            tmp_path: Path) -> None:
    path = scenario("resumefull", arms=("baseline", "cpu-16g"))
    out = tmp_path / "results"
    progress = Progress()
    with _full_disk_during(progress, out, "cpu-16g") as mode:
        started = time.monotonic()
        first = run_rollout(path, RunOptions(out_dir=out, write_reports=False), say=progress)
        took = time.monotonic() - started
        how = list(mode)
    run_dir = next(d for d in out.iterdir() if d.is_dir())
    assert took < RUN_LIMIT_S, took
    assert first.exit_code == 4, (how, first.message, progress.lines)
    flat = " ".join(first.message.split())
    assert "cannot write the run's results (the disk is full): " in flat, (how, flat)
    assert "No space left on device" in flat and f"harness run --resume {run_dir}" in flat, flat
    if how == ["tmpfs"]:  # the load generator could not write the arm's records
        assert "redoes cpu-16g (the harness's failure, not the server's or the tier's)" in flat, flat
    failed = _events(run_dir, "cpu-16g")[-1]
    assert failed["event"] == "failed" and failed["cause"] == "harness", failed
    assert _events(run_dir, "baseline")[-1]["event"] == "completed"
    assert finished_arms(read_arm_events(RunDir(run_dir))) == {"baseline"}, "--resume must redo cpu-16g"

    before = rebuild_summary(run_dir)  # `harness report` before the resume: no tier is blamed
    assert before.verdict == "failed" and before.exit_code == 4, before.verdict_reason
    assert "harness itself failed" in before.verdict_reason
    tier = before.arms[1]
    assert tier.decision == "failed" and tier.failure is not None and tier.failure.phase == "harness"
    assert tier.reasons[0].startswith("not judged: the harness itself failed"), tier.reasons

    started = time.monotonic()
    again = run_rollout(None, RunOptions(resume=run_dir, write_reports=False), say=progress)
    assert time.monotonic() - started < RUN_LIMIT_S
    summary = json.loads((run_dir / "summary.json").read_text())
    assert again.exit_code == EXIT_BY_VERDICT[summary["verdict"]] != 4, (again.message, summary["verdict_reason"])
    arm = summary["arms"][1]
    assert arm["name"] == "cpu-16g" and arm["decision"] not in ("failed", "skipped") and arm["failure"] is None, arm
    entries = [e for e in journal.read(run_dir / "steps.jsonl") if e["arm"] == "cpu-16g" and e["step"] == 0]
    assert entries and entries[-1]["attempt"] >= 2 and not entries[-1]["partial"], entries
    assert arm["steps"][0]["requests"] == entries[-1]["requests"] > 0


def _start(args: list[str]) -> subprocess.Popen[str]:
    """``harness run`` in its own process group (as a terminal's Ctrl-C reaches it), this test's state dir."""
    env = {**ENV, "HARNESS_STATE_DIR": os.environ["HARNESS_STATE_DIR"]}
    return subprocess.Popen([sys.executable, "-m", "harness", "run", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, env=env, text=True, start_new_session=True)


def _interrupt(proc: subprocess.Popen[str], marker: str, signals: int) -> tuple[str, list[int], float]:
    """At ``marker`` (once the server has finished a few requests) send SIGINT to the run's process group
    ``signals`` times, 50 ms apart; returns the output, the pids the run had started and seconds to exit."""
    seen, _url, found = read_to_step(proc, marker, 3, time.monotonic() + 90)
    pids: list[int] = []
    if found:
        pids = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
        for n in range(signals):
            if n:
                time.sleep(0.05)
            os.killpg(proc.pid, signal.SIGINT)
    sent = time.monotonic()
    assert pids, f"never saw {marker!r}:\n{''.join(seen)}"
    rest, _ = proc.communicate(timeout=60)
    return "".join(seen) + rest, pids, time.monotonic() - sent


def test_sigint_mid_step_then_resume_tells_attempts_apart(scenario: Callable[..., Path], tmp_path: Path) -> None:
    path = scenario("resumeattempts", arms=("baseline",), steps={"levels": [{"concurrency": 4, "duration_s": 2}]})
    out = tmp_path / "results"
    output, _pids, _took = _interrupt(_start([str(path), "--out", str(out)]), "[baseline] step 0", 1)
    run_dir = next(d for d in out.iterdir() if d.is_dir())
    assert "Traceback" not in output and f"harness run --resume {run_dir}" in output.replace("\n", ""), output

    done = run_rollout(None, RunOptions(resume=run_dir, write_reports=False), say=lambda _m: None)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert done.exit_code == EXIT_BY_VERDICT[summary["verdict"]], done.message
    rows = pq.read_table(run_dir / "requests.parquet").to_pandas()
    rows = rows[rows["step"] == 0]
    first, second = rows[rows["attempt"] == 1], rows[rows["attempt"] == 2]
    assert len(first) > 0 and len(second) > 0, rows["attempt"].value_counts()
    assert set(rows["attempt"]) == {1, 2}
    assert first["superseded"].all() and not second["superseded"].any(), "the abandoned attempt is marked"
    assert (first["error_kind"] == "cancelled").any(), "the interrupted attempt's cancelled rows are kept"
    shared = set(first["request_id"]) & set(second["request_id"])
    assert shared, "both attempts ran the same plan: the same request ids, told apart by the attempt"
    step = summary["arms"][0]["steps"][0]
    assert step["requests"] == len(second), (step["requests"], len(first), len(second))
    entries = [e for e in journal.read(run_dir / "steps.jsonl") if e["step"] == 0]
    assert [e["attempt"] for e in entries] == [2] and entries[0]["requests"] == len(second)
    attempts = [e for e in _events(run_dir, "baseline") if e["event"] == "attempt"]
    assert [e["attempt"] for e in attempts] == [1, 2]


def test_two_sigints_force_the_stop_with_a_message_and_a_journal_entry(scenario: Callable[..., Path],
                                                                       tmp_path: Path) -> None:
    path = scenario("resumeforced", arms=("baseline",), steps={"levels": [{"concurrency": 4, "duration_s": 20}]})
    out = tmp_path / "results"
    proc = _start([str(path), "--out", str(out)])
    output, pids, took = _interrupt(proc, "[baseline] step 0", 2)
    run_dir = next(d for d in out.iterdir() if d.is_dir())
    flat = output.replace("\n", "")
    assert proc.returncode == 4, output
    assert "Traceback" not in output, output
    assert "second interrupt: forced stop" in flat and "servers stopped" in flat, output
    assert f"harness run --resume {run_dir}" in flat, output
    assert took < 15.0, f"the forced stop took {took:.1f} s"
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in pids if _alive(p)], "a server or load process outlived the forced stop"
    last = _events(run_dir, "baseline")[-1]
    assert last["event"] == "interrupted" and last.get("forced") is True, last
    assert "baseline" not in finished_arms(read_arm_events(RunDir(run_dir)))


def test_a_third_signal_does_not_cut_the_forced_stop_short() -> None:
    cancel = threading.Event()
    raised = 0
    with cancel_on_signals(cancel):
        for _ in range(3):
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(0.05)  # the handler runs in the main thread, between bytecodes
            except ForcedStop:
                raised += 1
    assert cancel.is_set() and raised == 1


def test_old_run_files_read_as_attempt_one_and_cause_server(tmp_path: Path) -> None:
    old = pa.Table.from_pylist([{"arm": "a", "step": 0, "request_id": "a/s0/1", "send_ns": 10}])
    pq.write_table(old, tmp_path / "part-s000-c4-old-00000.parquet")  # a part from before ``attempt``
    table, warnings = read_parts([tmp_path / "part-s000-c4-old-00000.parquet"])
    assert not warnings and table.schema.equals(SCHEMA) and table.column("attempt").to_pylist() == [1]
    df = pd.DataFrame({"arm": ["a", "a", "a"], "step": [0, 0, 0], "send_ns": [10, 20, 30], "drill": [None] * 3})
    old_line = {"arm": "a", "step": 0, "start_ns": 15, "end_ns": 40}  # no attempt: attempt 1, as before
    old_entry = StepEntry.model_validate(old_line)
    assert old_entry.attempt == 1 and old_entry.line() == old_line, "read back, an old line is written as it was"
    assert counted_mask(df, [old_entry]).tolist() == [False, True, True]
    assert not superseded_mask(df, [old_entry]).any()
    df["attempt"] = [1, 2, 2]
    redone = StepEntry.model_validate(dict(old_line, attempt=2))
    assert counted_mask(df, [redone]).tolist() == [False, True, True]
    assert superseded_mask(df, [redone]).tolist() == [True, False, False]
    lines = [{"arm": "x", "event": "failed", "failure": {"message": "server exited with code 1 during step 0"}},
             {"arm": "y", "event": "failed", "failure": {"message": "step 0 (c4): load runner failed: OSError: "
                                                                     "[Errno 28] No space left on device"}},
             {"arm": "z", "event": "failed", "cause": "harness"},
             {"arm": "w", "event": "completed"}]
    events = [ArmEvent.model_validate(line) for line in lines]  # as the journal reader gives them
    assert [failure_cause(e) for e in events[:3]] == ["server", "harness", "harness"]
    assert finished_arms(events) == {"x", "w"}
    assert next_attempt([], "a", 0, earlier_records=False) == 1
    assert next_attempt([], "a", 0, earlier_records=True) == 2, "records from before attempts were journaled"
    assert next_attempt([ArmEvent(arm="a", event="attempt", step=0, attempt=2)], "a", 0,
                        earlier_records=True) == 3


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pid files of this file's servers in the test's own state directory."""
    monkeypatch.setenv("HARNESS_STATE_DIR", str(tmp_path / "state"))
