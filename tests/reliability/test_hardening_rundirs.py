"""Issue 17 items 12 and 13 for run directories: ``harness report``, ``compare`` and ``index`` on hand-corrupted or
hostile run directories, the index rebuild at the end of every run, and ``report`` on a full disk.

One fast simulator run (module fixture) is made in a results folder that already holds a sibling run whose
summary.json is nested 100,000 deep and an ``index.html`` that is a directory (so the end-of-run index rebuild
fails): the run's exit code must still be its verdict's. Every other case copies that run directory, corrupts one
file and runs the real command: exit 2 with a one-line message naming the file and the field, or 4 for a write
that failed (disk full) or an unexpected error; never 1, never a traceback, and in bounded time.

In-process cases go through the typer app with ``CliRunner``: an exception escaping the command would show as
exit 1 with ``result.exception`` set (and as a traceback from the console script), so asserting a ``SystemExit``
with the code is asserting what the console script returns; a few cases run ``python -m harness`` to show it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rel_support import make_scenario, small_tmpfs
from typer.testing import CliRunner

from harness.cli import app

CASE_LIMIT_S = 10.0  # no command here has a configured timeout; each case must end well within this
DEEP = 100_000


def _harness(*args: str, timeout: float = 120.0, env: dict[str, str] | None = None
             ) -> tuple[subprocess.CompletedProcess[str], float]:
    """``python -m harness ARGS`` (what the console script runs), and how long it took."""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, check=False)
    return proc, time.monotonic() - started


def _deep(path: Path) -> None:
    path.write_text("[" * DEEP + "]" * DEEP, encoding="utf-8")


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One fast simulator run into a results folder with a hostile sibling and an unwritable index."""
    base = tmp_path_factory.mktemp("rundirs")
    scenario = make_scenario(base / "rundirs.yaml", base / "kv", arms=("baseline", "cpu-16g"),
                             steps={"levels": [{"concurrency": 4, "duration_s": 1.0}]})
    results = base / "results"
    (results / "0-deep-sibling").mkdir(parents=True)
    _deep(results / "0-deep-sibling" / "summary.json")
    (results / "index.html").mkdir()  # the end-of-run index cannot be written
    proc, took = _harness("run", str(scenario), "--out", str(results), "--no-validate", timeout=180,
                          env={"HARNESS_STATE_DIR": str(base / "state")})
    runs = [d for d in results.iterdir() if d.is_dir() and d.name != "0-deep-sibling" and d.name != "index.html"]
    assert len(runs) == 1, proc.stdout + proc.stderr
    return {"proc": proc, "seconds": took, "run": runs[0], "results": results}


def test_index_failure_after_a_run_never_changes_its_exit_code(sim_run: dict[str, Any]) -> None:
    proc: subprocess.CompletedProcess[str] = sim_run["proc"]
    output = proc.stdout + proc.stderr
    summary = json.loads((sim_run["run"] / "summary.json").read_text())
    assert "Traceback" not in output, output
    assert proc.returncode == summary["exit_code"], output  # the verdict's code, not 1 (nor 4) from the index
    assert proc.returncode in (0, 1, 3, 5), output
    assert summary["verdict"] != "no-go" or proc.returncode == 1
    flat = " ".join(output.split())
    assert "warning: the results index in" in flat and "was not rebuilt" in flat, output


# Each case: (file corrupted, what it does to the copy, substrings the message must hold, extra report args).
Corrupt = Callable[[Path], None]


def _json_edit(name: str, change: Callable[[Any], Any]) -> Corrupt:
    def corrupt(run: Path) -> None:
        path = run / name
        path.write_text(json.dumps(change(json.loads(path.read_text()))), encoding="utf-8")
    return corrupt


def _first_step(change: Callable[[dict[str, Any]], None], raw: str | None = None) -> Corrupt:
    def corrupt(run: Path) -> None:
        path = run / "steps.jsonl"
        lines = path.read_text().splitlines()
        entry = json.loads(lines[0])
        change(entry)
        lines[0] = raw.replace("{}", json.dumps(entry)[1:-1], 1) if raw else json.dumps(entry)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return corrupt


def _write(name: str, text: str) -> Corrupt:
    def corrupt(run: Path) -> None:
        (run / name).write_text(text, encoding="utf-8")
    return corrupt


def _deep_first_line(run: Path) -> None:
    path = run / "steps.jsonl"
    path.write_text("[" * DEEP + "]" * DEEP + "\n" + path.read_text(), encoding="utf-8")


def _failure_as_text(run: Path) -> None:
    with (run / "arms.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"arm": "cpu-16g", "event": "failed", "failure": "boom"}) + "\n")


def _fifo(name: str) -> Corrupt:
    def corrupt(run: Path) -> None:
        (run / name).unlink()
        os.mkfifo(run / name)  # reading it would block forever
    return corrupt


def _huge_summary(run: Path) -> None:
    with (run / "summary.json").open("r+b") as fh:
        fh.truncate(65 << 20)  # sparse: 65 MiB of NULs, over the cap, on no disk space


def _truncate_parquet(run: Path) -> None:
    path = run / "requests.parquet"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _retype_parquet(run: Path) -> None:
    path = run / "requests.parquet"
    table = pq.read_table(path)
    index = table.schema.get_field_index("send_ns")
    pq.write_table(table.set_column(index, "send_ns", pa.array(["x"] * table.num_rows)), path)


def _pop(key: str) -> Callable[[dict[str, Any]], None]:
    def change(entry: dict[str, Any]) -> None:
        entry.pop(key)
    return change


def _put(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(entry: dict[str, Any]) -> None:
        entry[key] = value
    return change


CASES: dict[str, tuple[str, Corrupt, tuple[str, ...], tuple[str, ...]]] = {
    "manifest-list": ("manifest.json", _write("manifest.json", "[1, 2]"), ("expected a JSON object",), ()),
    "manifest-not-json": ("manifest.json", _write("manifest.json", "{nope"), ("not valid JSON (line 1",), ()),
    "manifest-no-run-id": ("manifest.json", _json_edit("manifest.json", lambda m: {k: v for k, v in m.items()
                                                                                    if k != "run_id"}),
                           ("run_id", "Field required"), ()),
    "manifest-launches-wrong-type": ("manifest.json", _json_edit("manifest.json", lambda m: {**m, "launches": "x"}),
                                     ("launches",), ()),
    "manifest-deep": ("manifest.json", lambda run: _deep(run / "manifest.json"), ("nested deeper than",), ()),
    "step-no-start_ns": ("steps.jsonl", _first_step(_pop("start_ns")), ("line 1", "start_ns", "Field required"), ()),
    "step-end_ns-1e20": ("steps.jsonl", _first_step(_put("end_ns", 1e20)), ("line 1", "end_ns"), ()),
    "step-end_ns-nan": ("steps.jsonl", _first_step(_pop("end_ns"), raw='{"end_ns": NaN, {}}'),
                        ("line 1", "end_ns", "finite"), ()),
    "step-negative": ("steps.jsonl", _first_step(_put("start_ns", -5)), ("start_ns", "greater than or equal"), ()),
    "step-end-before-start": ("steps.jsonl", _first_step(lambda e: e.__setitem__("end_ns", e["start_ns"] - 1)),
                              ("end_ns", "before start_ns"), ()),
    "step-absurd-duration": ("steps.jsonl", _first_step(lambda e: e.__setitem__("end_ns", e["start_ns"] + 10**18)),
                             ("end_ns - start_ns", "longer than any step"), ()),
    "step-deep-line": ("steps.jsonl", _deep_first_line, ("line 1", "nested deeper than"), ()),
    "arms-failure-wrong-type": ("arms.jsonl", _failure_as_text, ("failure", "valid dictionary"), ()),
    "scenario-malformed": ("scenario.yaml", _write("scenario.yaml", "name: [unclosed\n"), ("YAML",), ()),
    "scenario-not-a-mapping": ("scenario.yaml", _write("scenario.yaml", "- a\n- b\n"), ("mapping",), ()),
    "checks-wrong-shape": ("checks.json", _write("checks.json", '{"a": 1}'), ("expected a JSON list",), ()),
    "checks-bad-level": ("checks.json", _write("checks.json", '[{"name": "x", "level": "zzz", "message": "m"}]'),
                         ("0.level",), ()),
    "requests-truncated": ("requests.parquet", _truncate_parquet, ("not a readable Parquet file",), ()),
    "requests-wrong-type": ("requests.parquet", _retype_parquet, ("column send_ns", "expected integer"), ()),
    "summary-wrong-types": ("summary.json", _json_edit("summary.json", lambda s: {**s, "arms": "x"}),
                            ("arms", "valid list"), ("--from-summary",)),
    "summary-deep": ("summary.json", lambda run: _deep(run / "summary.json"), ("nested deeper than",),
                     ("--from-summary",)),
    "summary-too-large": ("summary.json", _huge_summary, ("may be at most 64 MiB",), ("--from-summary",)),
    "steps-fifo": ("steps.jsonl", _fifo("steps.jsonl"), ("FIFO",), ()),
    "manifest-fifo": ("manifest.json", _fifo("manifest.json"), ("FIFO",), ()),
}


def _copy_run(sim_run: dict[str, Any], dest: Path) -> Path:
    return Path(shutil.copytree(sim_run["run"], dest))


@pytest.mark.parametrize("case", list(CASES))
def test_report_on_a_corrupt_run_dir_is_exit_2_naming_file_and_field(case: str, sim_run: dict[str, Any],
                                                                     tmp_path: Path) -> None:
    filename, corrupt, needles, extra = CASES[case]
    run = _copy_run(sim_run, tmp_path / "run")
    corrupt(run)
    started = time.monotonic()
    result = CliRunner().invoke(app, ["report", str(run), *extra])
    took = time.monotonic() - started
    assert isinstance(result.exception, SystemExit), result.exception  # nothing escaped: no traceback
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    message = result.stderr.strip()
    assert message.startswith("error: ") and "\n" not in message, message
    assert str(run / filename) in message, message
    for needle in needles:
        assert needle in message, (needle, message)
    assert took < CASE_LIMIT_S, took


@pytest.mark.parametrize("case", ["step-no-start_ns", "summary-deep"])
def test_report_exit_code_through_the_console_entry_point(case: str, sim_run: dict[str, Any],
                                                          tmp_path: Path) -> None:
    filename, corrupt, needles, extra = CASES[case]
    run = _copy_run(sim_run, tmp_path / "run")
    corrupt(run)
    proc, took = _harness("report", str(run), *extra, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and str(run / filename) in proc.stderr, proc.stderr
    assert all(needle in proc.stderr for needle in needles), proc.stderr
    assert took < CASE_LIMIT_S + 5, took


def _results_with_bad_siblings(sim_run: dict[str, Any], tmp_path: Path) -> Path:
    results = tmp_path / "results"
    good = _copy_run(sim_run, results / "good")
    (results / "deep").mkdir()
    _deep(results / "deep" / "summary.json")
    (results / "corrupt").mkdir()
    (results / "corrupt" / "summary.json").write_text('{"run_id": 5', encoding="utf-8")
    (results / "fifo").mkdir()
    os.mkfifo(results / "fifo" / "summary.json")  # reading it would block forever
    assert good.is_dir()
    return results


def test_index_lists_hostile_siblings_as_unreadable(sim_run: dict[str, Any], tmp_path: Path) -> None:
    results = _results_with_bad_siblings(sim_run, tmp_path)
    started = time.monotonic()
    result = CliRunner().invoke(app, ["index", str(results)])
    assert time.monotonic() - started < CASE_LIMIT_S
    assert result.exit_code == 0 and result.exception is None, result.output
    runs = {r["run_dir"]: r for r in json.loads((results / "index.json").read_text())["runs"]}
    assert runs["good"]["ok"] is True and runs["good"]["verdict"]
    assert "nested deeper than" in runs["deep"]["error"] and runs["deep"]["ok"] is False
    assert "not valid JSON" in runs["corrupt"]["error"]
    assert "FIFO" in runs["fifo"]["error"]
    html = (results / "index.html").read_text()
    assert html.count("unreadable") >= 3


def test_compare_with_a_hostile_sibling(sim_run: dict[str, Any], tmp_path: Path) -> None:
    results = _results_with_bad_siblings(sim_run, tmp_path)
    good = results / "good"
    for bad, needle in (("deep", "nested deeper than"), ("corrupt", "not valid JSON"), ("fifo", "FIFO")):
        started = time.monotonic()
        result = CliRunner().invoke(app, ["compare", str(good), str(results / bad)])
        assert time.monotonic() - started < CASE_LIMIT_S
        assert isinstance(result.exception, SystemExit) and result.exit_code == 2, result.output
        assert str(results / bad / "summary.json") in result.stderr and needle in result.stderr, result.stderr
    ok = CliRunner().invoke(app, ["compare", str(good), str(good)])
    assert ok.exit_code == 0, ok.output
    assert "verdict:" in ok.stdout


def test_compare_with_unreadable_requests_falls_back_to_the_summaries(sim_run: dict[str, Any],
                                                                      tmp_path: Path) -> None:
    good = _copy_run(sim_run, tmp_path / "a")
    bad = _copy_run(sim_run, tmp_path / "b")
    _retype_parquet(bad)
    result = CliRunner().invoke(app, ["compare", str(good), str(bad)])
    assert result.exit_code == 0, result.output
    assert "summaries only" in result.stdout and "column send_ns" in result.stdout, result.stdout


def test_report_on_a_full_disk_is_exit_4_naming_the_file(sim_run: dict[str, Any], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    mnt = tmp_path / "full"
    with small_tmpfs(mnt, "4m") as mounted:
        run = _copy_run(sim_run, mnt / "run")
        before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
        if mounted:  # fill what is left, so the first report file cannot be written
            fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                with contextlib.suppress(OSError):
                    for _ in range(4096):  # bounded: 4 MiB in 1 KiB writes at most
                        os.write(fd, b"\0" * 1024)
            finally:
                os.close(fd)
        else:  # no tmpfs here: every write of a report file fails as on a full disk
            real_fdopen = os.fdopen

            class Full:
                def __init__(self, fh: Any) -> None:
                    self.fh = fh

                def __enter__(self) -> Full:
                    return self

                def __exit__(self, *exc: object) -> None:
                    self.fh.close()

                def write(self, _text: str) -> int:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

            def fdopen(fd: int, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
                handle = real_fdopen(fd, mode, *args, **kwargs)
                writing = "w" in mode and os.readlink(f"/proc/self/fd/{fd}").startswith(str(run))
                return Full(handle) if writing else handle

            monkeypatch.setattr(os, "fdopen", fdopen)
        started = time.monotonic()
        result = CliRunner().invoke(app, ["report", str(run)])
        took = time.monotonic() - started
        monkeypatch.undo()
        assert isinstance(result.exception, SystemExit), result.exception
        code, stderr = result.exit_code, result.stderr
        assert code == 4, stderr
        assert "Traceback" not in stderr
        flat = " ".join(stderr.split())
        assert "cannot write the report (the disk is full): No space left on device" in flat, stderr
        assert f"{run / 'summary.json'};" in flat, stderr  # the file it could not write
        assert "kept as they were" in flat and "report.html" in flat and f"harness report {run}" in flat, stderr
        assert took < CASE_LIMIT_S + 5, took
        after = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
        assert after == before, "every file is as it was: nothing half-written, no temporary file left"
        if mounted:  # once there is room, the same command works
            (mnt / "filler").unlink()
            again = CliRunner().invoke(app, ["report", str(run)])
            assert again.exit_code == 0, again.output


def test_unexpected_error_while_writing_a_report_is_exit_4(sim_run: dict[str, Any], tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    run = _copy_run(sim_run, tmp_path / "run")

    def broken(_summary: Any) -> str:
        raise RuntimeError("renderer bug")

    monkeypatch.setattr("harness.report.writers.render_markdown", broken)
    monkeypatch.delenv("HARNESS_DEBUG", raising=False)
    result = CliRunner().invoke(app, ["report", str(run), "--from-summary"])
    assert isinstance(result.exception, SystemExit) and result.exit_code == 4, result.output
    message = result.stderr.strip()
    assert "Traceback" not in message and "\n" not in message
    assert "unexpected RuntimeError: renderer bug" in message and str(run) in message, message


def test_journal_reader_skips_only_a_torn_last_line(tmp_path: Path) -> None:
    from harness.rundir.bounded import read_json_lines
    from harness.rundir.errors import ReportInputError

    path = tmp_path / "steps.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{"a": 3, "b', encoding="utf-8")  # a crash mid-append
    assert [obj["a"] for _n, obj in read_json_lines(path, max_bytes=1 << 20, what="steps.jsonl")] == [1, 2]
    path.write_text('{"a": 1}\n{"a": 2, "b\n{"a": 3}\n', encoding="utf-8")  # garbage inside: hand-edited
    with pytest.raises(ReportInputError, match=r"steps\.jsonl line 2: not valid JSON"):
        read_json_lines(path, max_bytes=1 << 20, what="steps.jsonl")
    path.write_text('{"a": 1}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(ReportInputError, match=r"line 2: expected a JSON object, found list"):
        read_json_lines(path, max_bytes=1 << 20, what="steps.jsonl")
