"""harness report / compare / index as typer commands: exit 0 on success, 2 with one message on bad input."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from typer.testing import CliRunner

from harness.report.commands import compare_command, index_command, make_report_command, report_command
from harness.report.load import load_summary
from harness.schema.summary import Summary

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "runs"
runner = CliRunner()


def _app(command: Callable[..., Any]) -> typer.Typer:
    app = typer.Typer()
    app.command()(command)
    return app


def _copy(tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(FIXTURES / name, tmp_path / name))


def test_report_rebuilds_reports(tmp_path: Path) -> None:
    run = _copy(tmp_path, "failed-baseline")
    result = runner.invoke(_app(report_command), [str(run)])
    assert result.exit_code == 0, result.output
    for name in ("summary.json", "summary.md", "junit.xml", "report.html"):
        assert (run / name).is_file()
        assert name in result.output


def test_report_bad_input_exit_2_without_traceback(tmp_path: Path) -> None:
    cases = {
        str(tmp_path / "missing"): "no such directory",
        str(_copy(tmp_path, "invalid-summary")): "invalid summary",
        str(tmp_path): "summary.json: not found",
    }
    for arg, message in cases.items():
        result = runner.invoke(_app(report_command), [arg])
        assert result.exit_code == 2, (arg, result.output)
        assert message in result.output
        assert "Traceback" not in result.output
        assert result.output.startswith("error: ")


def test_report_uses_rebuild_hook_unless_from_summary(tmp_path: Path) -> None:
    run = _copy(tmp_path, "failed-baseline")
    calls: list[Path] = []

    def rebuild(run_dir: Path) -> Summary:
        calls.append(run_dir)
        return load_summary(run_dir).model_copy(update={"verdict_reason": "rebuilt from raw files"})

    app = _app(make_report_command(rebuild))
    assert runner.invoke(app, [str(run)]).exit_code == 0
    assert calls == [run]
    assert json.loads((run / "summary.json").read_text())["verdict_reason"] == "rebuilt from raw files"
    assert runner.invoke(app, [str(run), "--from-summary"]).exit_code == 0
    assert len(calls) == 1


def test_report_rebuild_errors_are_bad_input(tmp_path: Path) -> None:
    def rebuild(run_dir: Path) -> Summary:
        raise ValueError(f"{run_dir}/requests.parquet: missing column 'send_ns'")

    result = runner.invoke(_app(make_report_command(rebuild)), [str(_copy(tmp_path, "failed-baseline"))])
    assert result.exit_code == 2
    assert "missing column 'send_ns'" in result.output


def test_compare_text_and_json(tmp_path: Path) -> None:
    a, b = FIXTURES / "demo-sim", FIXTURES / "nogo-vllm"
    text = runner.invoke(_app(compare_command), [str(a), str(b)])
    assert text.exit_code == 0, text.output
    assert "verdict: go → no-go" in text.output
    assert "arm cpu: go → no-go *" in text.output
    data = runner.invoke(_app(compare_command), [str(a), str(b), "--json"])
    assert data.exit_code == 0
    parsed = json.loads(data.output)
    assert parsed["verdict_a"] == "go" and parsed["verdict_b"] == "no-go"
    bad = runner.invoke(_app(compare_command), [str(a), str(tmp_path / "nope")])
    assert bad.exit_code == 2 and "no such directory" in bad.output


def test_index_command(tmp_path: Path) -> None:
    results = tmp_path / "results"
    shutil.copytree(FIXTURES / "failed-baseline", results / "r1")
    result = runner.invoke(_app(index_command), [str(results)])
    assert result.exit_code == 0, result.output
    assert (results / "index.html").is_file() and (results / "index.json").is_file()
    bad = runner.invoke(_app(index_command), [str(tmp_path / "none")])
    assert bad.exit_code == 2 and bad.output.startswith("error: ")
