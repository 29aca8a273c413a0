"""Timing fidelity with arrival times: the p99 goal (< 1 ms), and the informative rows a harness run adds (the
client's own delay, arrival to parse, and the error the parse time would have had)."""

from __future__ import annotations

import pytest

from tools.perf.capacity import HARNESS_TOOL, CapacityResult
from tools.perf.harness_client import HarnessRun
from tools.perf.model import ClientRun, Workload
from tools.perf.rows import SECTION_TTFT, TTFT_P99_GOAL, fidelity_notes, fidelity_rows


def _run(errors_ms: list[float], parsed_ms: list[float], delays_ms: list[float]) -> HarnessRun:
    return HarnessRun(tool=HARNESS_TOOL, workload=Workload(64, 100), completed=100, errors=0, tokens=25_600,
                      window_s=10.0, cpu_s=2.5, ttft_errors_ms=errors_ms, ttft_sent_ns=list(range(len(errors_ms))),
                      run_queue_wait_s=0.5, ttft_parsed_errors_ms=parsed_ms, first_token_delays_ms=delays_ms,
                      first_token_sources={"kernel": len(errors_ms)})


def _paced(*runs: ClientRun) -> CapacityResult:
    result = CapacityResult()
    result.runs[(HARNESS_TOOL, 64)] = list(runs)
    return result


def test_the_goal_is_under_a_millisecond() -> None:
    assert (TTFT_P99_GOAL.op, TTFT_P99_GOAL.limit, TTFT_P99_GOAL.unit) == ("<", 1.0, "ms")


def test_a_harness_run_adds_the_delay_and_parse_time_rows() -> None:
    run = _run([0.01] * 100, [0.5] * 95 + [9.0] * 5, [0.49] * 95 + [8.99] * 5)
    rows = fidelity_rows(_paced(run, run), CapacityResult(), 64)
    by_figure = {r.figure: r for r in rows}
    p99 = by_figure["64 streams: |TTFT error| p99"]
    assert p99.goal == TTFT_P99_GOAL and p99.passed is True and p99.value == pytest.approx(0.01)
    assert "first tokens timed at arrival: 200 kernel" in by_figure["64 streams: |TTFT error| median"].note
    delay = by_figure["64 streams: first-token client delay p99"]
    parsed = by_figure["64 streams: |TTFT error| p99, parse time"]
    assert delay.goal is None and parsed.goal is None and delay.section == parsed.section == SECTION_TTFT
    assert delay.value == pytest.approx(8.99) and parsed.value == pytest.approx(9.0)
    assert "informative" in delay.note and "informative" in parsed.note


def test_a_p99_of_a_millisecond_or_more_misses_and_explains() -> None:
    run = _run([0.01] * 95 + [8.0] * 5, [0.5] * 100, [0.4] * 100)
    rows = fidelity_rows(_paced(run), CapacityResult(), 64)
    assert next(r for r in rows if r.figure == "64 streams: |TTFT error| p99").passed is False
    (note,) = fidelity_notes(_paced(run), 64)
    assert "5 of 100 first tokens were timed 1 ms or more" in note
    assert "merges unread TCP segments" in note


def test_runs_without_arrival_data_get_no_extra_rows() -> None:
    plain = ClientRun(tool=HARNESS_TOOL, workload=Workload(64, 100), completed=100, errors=0, tokens=1000,
                      window_s=10.0, cpu_s=1.0, ttft_errors_ms=[0.1] * 100, ttft_sent_ns=list(range(100)))
    rows = fidelity_rows(_paced(plain), CapacityResult(), 64)
    assert [r.figure for r in rows] == ["64 streams: |TTFT error| median", "64 streams: |TTFT error| p99"]
