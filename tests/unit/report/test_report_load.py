"""Bad input to the report commands gives one clear message naming the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.report.load import ReportInputError, load_summary, load_summary_file
from harness.report.writers import summary_json_text
from tests.support.sample import sample_summary

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "runs"


def test_loads_fixture_runs() -> None:
    for name in ("demo-sim", "nogo-vllm", "failed-baseline"):
        summary = load_summary(FIXTURES / name)
        assert summary.arms, name


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(ReportInputError, match="no such directory"):
        load_summary(tmp_path / "nope")


def test_file_instead_of_directory(tmp_path: Path) -> None:
    f = tmp_path / "x.txt"
    f.write_text("x")
    with pytest.raises(ReportInputError, match="not a directory"):
        load_summary(f)


def test_directory_without_summary(tmp_path: Path) -> None:
    with pytest.raises(ReportInputError, match=r"summary\.json: not found"):
        load_summary(tmp_path)


def test_not_json(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text("{not json")
    with pytest.raises(ReportInputError, match=r"not valid JSON \(line 1"):
        load_summary(tmp_path)


def test_json_array(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text("[]")
    with pytest.raises(ReportInputError, match="expected a JSON object"):
        load_summary(tmp_path)


def test_invalid_fixture_names_fields() -> None:
    with pytest.raises(ReportInputError) as info:
        load_summary(FIXTURES / "invalid-summary")
    message = str(info.value)
    assert "invalid summary" in message
    assert "verdict" in message
    assert "arms.0.decision" in message


def test_newer_schema_asks_for_upgrade(tmp_path: Path) -> None:
    data = json.loads(summary_json_text(sample_summary()))
    data["schema_version"] = 99
    (tmp_path / "summary.json").write_text(json.dumps(data))
    with pytest.raises(ReportInputError, match="upgrade the harness"):
        load_summary_file(tmp_path / "summary.json")


def test_binary_garbage(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ReportInputError, match="cannot read"):
        load_summary(tmp_path)
