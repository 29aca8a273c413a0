"""The ``make perf`` table: goal logic, pass/miss, and the markdown it prints."""

from __future__ import annotations

import math

import pytest

from tools.perf.capacity import HARNESS_TOOL, CapacityOptions, CapacityResult
from tools.perf.model import ClientRun, Workload
from tools.perf.peer_vllm import TOOL as PEER_TOOL
from tools.perf.rows import capacity_rows, fidelity_rows, ratio_row
from tools.perf.table import Goal, PerfTable, Row, fmt_number, markdown


@pytest.mark.parametrize(("op", "limit", "value", "met"), [
    ("<", 30.0, 29.9, True), ("<", 30.0, 30.0, False), ("<=", 30.0, 30.0, True), (">=", 1.0, 1.0, True),
    (">=", 1.0, 0.99, False), (">", 1.0, 1.0, False), ("<", 5.0, None, False), ("<", 5.0, math.nan, False),
    (">=", 1.0, math.inf, False),
])
def test_goal_met(op: str, limit: float, value: float | None, met: bool) -> None:
    assert Goal(op, limit).met(value) is met  # type: ignore[arg-type]


def test_goal_text() -> None:
    assert Goal("<", 30, "s").text == "< 30.0 s"
    assert Goal(">=", 1.0, "x").text == ">= 1.00 x"


def test_row_passed_and_actual() -> None:
    no_goal = Row("s", "f", "t", 12.345, "ms")
    assert no_goal.passed is None and no_goal.actual == "12.3 ms"
    met = Row("s", "f", "t", 4.0, "ms", Goal("<", 5.0, "ms"))
    assert met.passed is True
    missed = Row("s", "f", "t", 6.0, "ms", Goal("<", 5.0, "ms"))
    assert missed.passed is False
    broken = Row("s", "f", "t", 1.0, "ms", Goal("<", 5.0, "ms"), error="bench crashed")
    assert broken.passed is False and broken.actual == "n/a"  # a missing figure never passes


@pytest.mark.parametrize(("value", "text"), [(1234567.0, "1,234,567"), (123.4, "123"), (12.34, "12.3"),
                                             (1.234, "1.23"), (0.99992, "1.000"), (0.884, "0.884"),
                                             (0.01234, "0.0123"), (0.0, "0.00")])
def test_fmt_number(value: float, text: str) -> None:
    assert fmt_number(value) == text


def test_markdown_lists_goals_and_misses() -> None:
    table = PerfTable(title="perf", facts=[("host", "test")], notes=["a note"])
    table.add(Row("3 analysis", "1M records", "bench", 11.4, "s", Goal("<", 30.0, "s")))
    table.add(Row("2 timing", "p99 | error", "harness", 18.5, "ms", Goal("<", 5.0, "ms"), note="max 39 ms"))
    table.add(Row("4 sim", "tokens/s", "sim", 90000.0, "tok/s"))
    text = markdown(table)
    lines = text.splitlines()
    assert lines[0] == "# perf" and "- host: test" in lines
    rows = [ln for ln in lines if ln.startswith("| ")]
    assert len(rows) == 4  # header + 3 rows
    assert "PASS" in rows[1] and "MISS" in rows[2] and "PASS" not in rows[3] and "MISS" not in rows[3]
    assert "p99 \\| error" in rows[2]  # a pipe inside a cell is escaped
    assert "Goals: 1 of 2 met; missed: p99 | error (harness)" in text
    assert text.rstrip().endswith("- a note")
    assert len({len(r) for r in rows[:1]}) == 1


def _run(tool: str, tokens: int, cpu_s: float, errors: list[float] | None = None) -> ClientRun:
    errs = errors or []
    return ClientRun(tool=tool, workload=Workload(64, 100), completed=100, errors=0, tokens=tokens, window_s=2.0,
                     cpu_s=cpu_s, ttft_errors_ms=errs, ttft_sent_ns=[i * 10**7 for i in range(len(errs))])


def test_ratio_row_goal() -> None:
    row = ratio_row("64 streams", _run(HARNESS_TOOL, 1000, 1.0), _run(PEER_TOOL, 1000, 2.0))
    assert row.value == pytest.approx(2.0) and row.passed is True
    row = ratio_row("64 streams", _run(HARNESS_TOOL, 1000, 2.0), _run(PEER_TOOL, 1000, 1.0))
    assert row.value == pytest.approx(0.5) and row.passed is False
    missing = ratio_row("64 streams", _run(HARNESS_TOOL, 1000, 2.0), None)
    assert missing.passed is False and missing.error


def test_capacity_rows_keep_best_run_and_report_missing_peer() -> None:
    result = CapacityResult()
    result.runs[(HARNESS_TOOL, 64)] = [_run(HARNESS_TOOL, 1000, 2.0), _run(HARNESS_TOOL, 1000, 1.0)]
    opts = CapacityOptions(levels=(64,), peer_error="install failed")
    rows = capacity_rows(result, opts, (64,), "fast server")
    mine = [r for r in rows if r.tool == HARNESS_TOOL]
    assert mine[1].value == pytest.approx(1.0)  # CPU s per 1k tokens of the better run
    peer = [r for r in rows if r.tool == PEER_TOOL]
    assert len(peer) == 2 and all(r.error == "install failed" for r in peer)
    assert rows[-1].passed is False  # no peer: the ratio goal is missed, not silently met


def test_fidelity_rows_pool_runs_and_judge_p99() -> None:
    paced = CapacityResult()
    paced.runs[(HARNESS_TOOL, 64)] = [_run(HARNESS_TOOL, 1000, 1.0, [0.5] * 99 + [3.0]),
                                      _run(HARNESS_TOOL, 1000, 1.0, [0.5] * 99 + [3.0])]
    rows = fidelity_rows(paced, CapacityResult(), 64)
    median, p99 = rows[:2]
    assert median.value == pytest.approx(0.5)
    assert p99.goal is not None and p99.passed is True and p99.value is not None and p99.value < 1
    empty = fidelity_rows(CapacityResult(), CapacityResult(), 64)
    assert empty[1].passed is False and empty[1].error


def test_fidelity_notes_only_when_the_goal_is_missed() -> None:
    from tools.perf.rows import fidelity_notes

    good = CapacityResult()
    good.runs[(HARNESS_TOOL, 64)] = [_run(HARNESS_TOOL, 1000, 1.0, [0.5] * 100)]
    assert fidelity_notes(good, 64) == []
    bad = CapacityResult()
    slow = ClientRun(tool=HARNESS_TOOL, workload=Workload(64, 100), completed=100, errors=0, tokens=1000,
                     window_s=10.0, cpu_s=1.0, ttft_errors_ms=[0.5] * 90 + [20.0] * 10,
                     ttft_sent_ns=list(range(100)), run_queue_wait_s=4.0)
    bad.runs[(HARNESS_TOOL, 64)] = [slow]
    (note,) = fidelity_notes(bad, 64)
    assert "10 of 100" in note and "4.0 s of 10.0 s (40%)" in note
