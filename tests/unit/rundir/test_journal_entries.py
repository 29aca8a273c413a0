"""The journals' line models and their one writer and reader: run directories written before the models read back
line for line, a written entry reads back as itself, and the strict and tolerant readers refuse or skip bad lines."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from harness.rundir.entries import ArmEvent, DrillEvent, JournalLine, ProbeSearch, StepEntry
from harness.rundir.errors import ReportInputError
from harness.rundir.journal import (
    append_arm_event,
    append_drill_event,
    append_step,
    read_arm_events,
    read_drill_events,
    read_step_entries,
)
from harness.rundir.layout import ARMS, DRILL_EVENTS, STEPS, RunDir
from harness.rundir.resume import failure_cause
from harness.schema.summary import ClientHealth

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "demo-prelayout"


def _dumped(line: JournalLine) -> str:
    return json.dumps(line.line(), sort_keys=True, default=str)


@pytest.mark.parametrize(("name", "model"), [(STEPS, StepEntry), (ARMS, ArmEvent), (DRILL_EVENTS, DrillEvent)])
def test_a_run_written_before_the_models_reads_back_line_for_line(name: str, model: type[JournalLine]) -> None:
    lines = (FIXTURE / name).read_text(encoding="utf-8").splitlines()
    assert lines
    assert [_dumped(model.model_validate_json(line)) for line in lines] == lines


def test_the_fixture_journals_read_through_the_strict_readers() -> None:
    run = RunDir(FIXTURE)
    steps = read_step_entries(run)
    assert {e.attempt for e in steps} == {1}  # the drill phases name no attempt: attempt 1
    assert [e.drill_phase for e in steps if e.drill] == ["during", "before", "during"]
    assert all(e.client is not None and e.client.per_process for e in steps)
    events = read_arm_events(run)
    assert {e.event for e in events} >= {"starting", "ready", "attempt", "completed"}
    restart = next(e for e in read_drill_events(run) if e.action == "restart")
    assert restart.ok is True and isinstance(restart.extra("ready_ns"), int) and restart.extra("nothing") is None


def test_a_written_step_entry_reads_back_as_itself_with_secrets_masked(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    client = ClientHealth(cpu_percent=12.5, processes=2, note="secret-token-123 was in a note")
    probe = StepEntry(arm="cpu", step=-1000, label="search-c48", concurrency=48, rate_rps=None, start_ns=10,
                      end_ns=20, start_wall_ns=30, end_wall_ns=40, warmup=False, requests=5, errors=1, client=client,
                      partial=False, error=None, recorded_at=1.5, planned_duration_s=4.0, ended_early=False,
                      stop_reason=None, attempt=2, search=ProbeSearch(session=2, probe=1, load=48, extended=False))
    append_step(run, probe, lambda value: json.loads(json.dumps(value).replace("secret-token-123", "***")))
    line = json.loads(run.steps.read_text(encoding="utf-8"))
    assert line["client"]["note"] == "*** was in a note" and line["client"]["send_lag_ms_p99"] is None
    assert line["search"] == {"session": 2, "probe": 1, "load": 48, "extended": False}  # an int load stays one
    assert "drill" not in line, "a line holds the fields its writer set"
    (back,) = read_step_entries(run)
    assert back.line() == line and back.search == probe.search and back.measured is False


def test_a_line_from_before_attempts_and_searches_reads_with_the_defaults() -> None:
    entry = StepEntry.model_validate({"arm": "a", "step": 0, "start_ns": 1, "end_ns": 3_000_000_001, "flag": "x"})
    assert entry.attempt == 1 and entry.search is None and entry.measured and entry.duration_s == 3.0
    assert entry.extra("flag") == "x" and entry.line()["flag"] == "x", "a key the model does not name passes"


def test_an_arm_event_is_written_and_judged_as_its_line(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    failed = ArmEvent(arm="cpu", event="failed", at="2026-01-01T00:00:00Z", steps=1, cause="harness",
                      failure={"phase": "step", "message": "disk full", "log_tail": ["a"]}, identity={"pid": "1"})
    append_arm_event(run, failed)
    (back,) = read_arm_events(run)
    assert back.failure is not None and back.failure.message == "disk full" and back.extra("identity") == {"pid": "1"}
    line = json.loads(run.arms.read_text(encoding="utf-8"))
    assert failure_cause(back) == failure_cause(ArmEvent.model_validate(line)) == "harness"


def test_a_drill_event_keeps_its_actions_details(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    append_drill_event(run, DrillEvent(arm="tiered", kind="cache_loss", number=1, drill_run="ab12", event="action",
                                       at_ns=5, at_wall_ns=6, action="cache_loss", removed_entries=7))
    (back,) = read_drill_events(run)
    assert back.action == "cache_loss" and back.extra("removed_entries") == 7


def _good(step: int) -> str:
    return json.dumps({"arm": "a", "step": step, "label": "c4", "start_ns": 1, "end_ns": 2, "client": {}})


def test_the_strict_reader_skips_only_a_torn_last_line_and_names_the_bad_one(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.steps.write_text(_good(0) + "\n" + _good(1) + '\n{"arm": "a", "st', encoding="utf-8")
    assert [e.step for e in read_step_entries(run)] == [0, 1]
    run.steps.write_text(_good(0) + "\n" + json.dumps({"arm": "a", "step": 1, "start_ns": 5, "end_ns": 4}) + "\n",
                         encoding="utf-8")
    with pytest.raises(ReportInputError, match=r"steps\.jsonl line 2: end_ns \(4\) is before start_ns \(5\)"):
        read_step_entries(run)
    run.steps.write_text(json.dumps({"arm": "a", "step": 0, "start_ns": 1, "end_ns": 2, "attempt": 0}) + "\n",
                         encoding="utf-8")
    with pytest.raises(ReportInputError, match=r"line 1: attempt: Input should be greater than or equal to 1"):
        read_step_entries(run)


def test_the_tolerant_reader_skips_bad_lines_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    run = RunDir(tmp_path)
    run.steps.write_text(_good(0) + "\n" + json.dumps({"arm": "a"}) + "\n" + "[1, 2]\n" + '{"arm": "a", "st',
                         encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        entries = read_step_entries(run, strict=False)
    assert [e.step for e in entries] == [0] and entries[0].duration_s == pytest.approx(1e-9)
    assert all(f"line {n}" in caplog.text for n in (2, 3, 4))
    assert read_step_entries(RunDir(tmp_path / "absent"), strict=False) == []
    assert read_step_entries(RunDir(tmp_path / "absent")) == []
