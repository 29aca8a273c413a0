"""The writer registry, atomic writes, and rebuilding every report from a run directory."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.report import writers
from harness.report.load import ReportInputError
from harness.report.writers import WRITERS, register_writer, render_run, summary_json_text, write_atomic, write_reports
from harness.schema.summary import Summary
from tests.support.sample import sample_summary

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "runs"


def test_registry_names_and_files() -> None:
    assert list(WRITERS) == ["json", "md", "junit", "html"]
    assert [f for f, _ in WRITERS.values()] == ["summary.json", "summary.md", "junit.xml", "report.html"]


def test_summary_json_is_model_dump_with_html_safe_escapes() -> None:
    summary = sample_summary(model_name="a<b>&c")
    text = summary_json_text(summary)
    assert text == summary.model_dump_json(indent=2).replace("<", "\\u003c").replace(">", "\\u003e").replace(
        "&", "\\u0026") + "\n"
    assert Summary.model_validate_json(text) == summary


def test_render_run_from_summary_json(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "failed-baseline", run)
    before = (run / "summary.json").read_bytes()
    written = render_run(run)
    assert set(written) == {"json", "md", "junit", "html"}
    assert all(p.parent == run and p.is_file() for p in written.values())
    assert (run / "summary.json").read_bytes() == before
    assert not list(run.glob(".*.tmp"))


def test_render_run_with_given_summary_overrides_file(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "failed-baseline", run)
    summary = Summary.model_validate_json((run / "summary.json").read_text())
    changed = summary.model_copy(update={"verdict_reason": "recomputed"})
    render_run(run, changed)
    assert json.loads((run / "summary.json").read_text())["verdict_reason"] == "recomputed"
    assert "recomputed" in (run / "report.html").read_text()


def test_render_run_rejects_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ReportInputError, match="no such directory"):
        render_run(tmp_path / "missing")
    bad = tmp_path / "bad"
    shutil.copytree(FIXTURES / "invalid-summary", bad)
    with pytest.raises(ReportInputError, match="invalid summary"):
        render_run(bad)
    assert not (bad / "report.html").exists()


def test_only_and_unknown_writers(tmp_path: Path) -> None:
    summary = Summary.model_validate_json((FIXTURES / "failed-baseline" / "summary.json").read_text())
    written = write_reports(summary, tmp_path, only=["md", "junit"])
    assert set(written) == {"md", "junit"}
    assert not (tmp_path / "report.html").exists()
    with pytest.raises(ValueError, match="unknown report writer"):
        write_reports(summary, tmp_path, only=["pdf"])


def test_register_writer_runs_before_html(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writers, "WRITERS", dict(WRITERS))
    register_writer("txt", "verdict.txt", lambda s, _d: f"{s.verdict}\n")
    assert list(writers.WRITERS)[-2:] == ["txt", "html"]
    summary = Summary.model_validate_json((FIXTURES / "failed-baseline" / "summary.json").read_text())
    written = writers.write_reports(summary, tmp_path, only=["txt"])
    assert written["txt"].read_text() == "failed\n"


def test_write_atomic_leaves_old_file_on_error(tmp_path: Path) -> None:
    target = write_atomic(tmp_path / "x.txt", "old")

    with pytest.raises(TypeError):
        write_atomic(target, 123)  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]
