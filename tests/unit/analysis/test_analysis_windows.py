"""Windowed p99 series: window layout inside steps, event placement, exact per-window percentiles."""

from __future__ import annotations

import numpy as np
import pytest
from analysis_helpers import BASE, MS, frame, record

from harness.analysis import windows
from harness.rundir.entries import StepEntry
from harness.rundir.records import RequestRecord

S = 1000.0  # ms per second


def _spans(end0_s: float = 25.0) -> list[StepEntry]:
    return [StepEntry(arm="a", step=0, start_ns=BASE, end_ns=BASE + round(end0_s * S * MS)),
            StepEntry(arm="a", step=1, start_ns=BASE + round(30 * S * MS), end_ns=BASE + round(40 * S * MS))]


def _records() -> list[RequestRecord]:
    return [
        record("a", 0, 1 * S, 100.0, [10, 20]),  # first token at 1.1 s: window 0
        record("a", 0, 2 * S, 150.0, [30]),
        record("a", 0, 12 * S, 200.0, [5]),  # window 1
        record("a", 0, 22 * S, 300.0, [7]),  # window 2 (20..25 s)
        record("a", 0, 24.9 * S, 400.0, [9]),  # first token after the step ended: the last window
        record("a", 0, 3 * S, 999.0, [1], error="stalled"),  # counted, not in percentiles
        record("a", -1, 0, 5000.0, [1]),  # warm-up: nowhere
        record("a", 1, 31 * S, 50.0, [2, 2]),
    ]


def test_layout_and_placement() -> None:
    points = windows(frame(_records()), 10.0, steps=_spans())
    assert [(p.step, p.start_s, p.end_s) for p in points] == [
        (0, 0.0, 10.0), (0, 10.0, 20.0), (0, 20.0, 25.0), (1, 30.0, 40.0)]
    assert [p.requests for p in points] == [3, 1, 2, 1]
    assert points[0].ttft_p99_ms == pytest.approx(np.percentile([100.0, 150.0], 99))
    assert points[0].itl_p99_ms == pytest.approx(np.percentile([10, 20, 30], 99))
    assert points[1].ttft_p99_ms == pytest.approx(200.0)
    assert points[2].ttft_p99_ms == pytest.approx(np.percentile([300.0, 400.0], 99))
    assert points[2].e2e_p99_ms == pytest.approx(np.percentile([308.0, 410.0], 99))
    assert points[3].itl_p99_ms == pytest.approx(2.0)


def test_short_last_piece_joins_the_previous_window() -> None:
    points = windows(frame(_records()), 10.0, steps=_spans(), min_fraction=0.6)
    assert [(p.step, p.start_s, p.end_s) for p in points][:2] == [(0, 0.0, 10.0), (0, 10.0, 25.0)]
    assert points[1].requests == 3


def test_empty_window_has_no_percentiles() -> None:
    points = windows(frame([record("a", 0, 1 * S, 10.0, [1])]), 5.0,
                     steps=[StepEntry(arm="a", step=0, start_ns=BASE, end_ns=BASE + round(20 * S * MS))])
    assert len(points) == 4
    assert points[1].requests == 0 and points[1].ttft_p99_ms is None and points[1].itl_p99_ms is None


def test_without_spans_windows_follow_the_records() -> None:
    points = windows(frame([record("a", 0, 0, 10.0, [1]), record("a", 0, 4 * S, 10.0, [1])]), 2.0)
    assert points[0].start_s == 0.0
    assert sum(p.requests for p in points) == 2


def test_bad_window_length() -> None:
    with pytest.raises(ValueError, match="window_s must be positive"):
        windows(frame(_records()), 0.0, steps=_spans())


def test_absurd_step_span_is_a_clear_error_not_a_hang() -> None:
    # Six days: within what a journal entry may hold (a week), far more windows of 0.5 s than the analysis makes.
    spans = [StepEntry(arm="a", step=0, start_ns=BASE, end_ns=BASE + 6 * 86_400 * 10**9)]
    with pytest.raises(ValueError, match=r"arm 'a' step 0 spans .* check the step times"):
        windows(frame([record("a", 0, 0, 10.0, [1])]), 0.5, steps=spans)
