"""A results disk that fills up mid-run: one clear error (exit 4, no traceback), the servers stopped, and everything
written before stays readable, so ``harness report`` (or ``--resume``) works once there is room again.

Where the test may mount a small tmpfs (root in most containers) the run writes into it for real; elsewhere (or with
``HARNESS_TEST_NO_TMPFS=1``) the same outcome is checked with the journal's writes failing with ENOSPC in-process."""

from __future__ import annotations

import contextlib
import errno
import gzip
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from rel_support import small_tmpfs
from typer.testing import CliRunner

from harness.cli import app
from harness.core.atomic import write_json_atomic
from harness.run.options import RunOptions
from harness.run.orchestrator import run_rollout
from harness.rundir import journal


def _check_readable(run_dir: Path) -> None:
    """Every file the run wrote parses (JSON, JSON lines, parquet, gzip up to where it was cut)."""
    checked = 0
    for path in run_dir.rglob("*"):
        if not path.is_file() or path.name.startswith("."):
            continue
        if path.suffix == ".json":
            json.loads(path.read_text())
        elif path.suffix == ".jsonl":
            for line in path.read_text().splitlines():
                json.loads(line)
        elif path.suffix == ".parquet":
            pq.read_table(path)
        elif path.name.endswith(".gz"):
            from harness.scrape.series import load_scrapes

            load_scrapes(path)  # tolerant of a cut-off tail, by design
            with gzip.open(path, "rb") as fh, contextlib.suppress(EOFError, OSError):
                fh.read()
        checked += 1
    assert checked >= 3


def test_disk_full_gives_a_clear_error_and_keeps_what_was_written(
        scenario: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = scenario("diskfull", arms=("baseline", "cpu-16g"), steps={"levels": [{"concurrency": 4, "duration_s": 1}]})
    out = tmp_path / "full"
    with small_tmpfs(out, "64k") as mounted:
        if mounted:
            cli = CliRunner().invoke(app, ["run", str(path), "--out", str(out)])
            output, code = cli.output, cli.exit_code
            assert "Traceback" not in output and isinstance(cli.exception, (SystemExit, type(None))), output
        else:  # no tmpfs here: the journal's writes fail as on a full disk
            real_write = os.write

            def full(fd: int, data: bytes) -> int:
                if os.readlink(f"/proc/self/fd/{fd}").endswith("steps.jsonl"):
                    real_write(fd, bytes(data)[: len(data) // 2])
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                return real_write(fd, data)

            monkeypatch.setattr(os, "write", full)
            result = run_rollout(path, RunOptions(out_dir=out), say=lambda _m: None)
            monkeypatch.undo()
            output, code = result.message, result.exit_code
        assert code == 4, output
        flat = " ".join(output.split())
        assert "cannot write the run's results (the disk is full)" in flat, output
        run_dirs = [d for d in out.iterdir() if d.is_dir()]
        assert len(run_dirs) == 1
        run_dir = run_dirs[0]
        assert f"harnessreport{run_dir}" in "".join(output.split()), output  # the console may wrap the path
        _check_readable(run_dir)
        if mounted:
            subprocess.run(["mount", "-o", "remount,size=16m", str(out)], check=True, timeout=10)
        report = CliRunner().invoke(app, ["report", str(run_dir)])
        assert report.exit_code == 0, report.output
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["arms"][0]["name"] == "baseline"


def test_journal_append_cut_by_a_full_disk_leaves_no_torn_line(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "steps.jsonl"
    journal.append(path, {"step": 0})
    real_write = os.write

    def half(fd: int, data: bytes) -> int:
        real_write(fd, bytes(data)[:5])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", half)
    with pytest.raises(OSError) as info:
        journal.append(path, {"step": 1, "padding": "x" * 100})
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(path)
    monkeypatch.undo()
    assert path.read_text() == '{"step": 0}\n', "the torn line was cut off"
    journal.append(path, {"step": 2})
    assert [e["step"] for e in journal.read(path)] == [0, 2]
    with pytest.raises(OSError):
        monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))
        write_json_atomic(tmp_path / "manifest.json", {"a": 1})
    assert not list(tmp_path.glob("*manifest.json*")), "no half-written manifest (nor its temporary) left beside"
