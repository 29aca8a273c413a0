"""The rows that count: of a measured step's counted attempt, sent within that attempt's journaled span."""

from __future__ import annotations

import pandas as pd

from harness.rundir.attempts import counted_attempts, counted_entries, counted_rows, superseded_mask
from harness.rundir.entries import StepEntry


def _entry(step: int, attempt: int, start: int, end: int, **fields: object) -> StepEntry:
    return StepEntry.model_validate({"arm": "a", "step": step, "start_ns": start, "end_ns": end, "attempt": attempt,
                                     **fields})


ENTRIES = [
    _entry(-1, 1, 0, 10, warmup=True),
    _entry(0, 1, 10, 20, partial=True),  # cut short ...
    _entry(0, 2, 100, 200),  # ... and run again
    _entry(1, 1, 200, 300),
    _entry(-2, 1, 300, 400, drill="restart", drill_phase="during"),
]
ROWS = pd.DataFrame({
    "request_id": ["warm", "old", "first", "mid", "last", "late", "unsent", "s1", "drill", "unjournaled", "other"],
    "arm": ["a"] * 10 + ["b"],
    "step": [-1, 0, 0, 0, 0, 0, 0, 1, -2, 2, 0],
    "attempt": [1, 1, 2, 2, 2, 2, 2, 1, 1, 1, 2],
    "send_ns": [5, 15, 100, 150, 200, 201, None, 250, 350, 500, 150],
    "drill": [None] * 8 + ["restart", None, None],
}).astype({"send_ns": "Int64"})


def test_counted_attempt_is_the_latest_journaled_per_measured_step() -> None:
    assert counted_attempts(ENTRIES) == {("a", 0): 2, ("a", 1): 1}
    kept = counted_entries(ENTRIES)
    assert [(e.step, e.attempt) for e in kept] == [(-1, 1), (0, 2), (1, 1), (-2, 1)]


def test_counted_rows_are_the_counted_attempt_inside_its_span() -> None:
    rows = counted_rows(ROWS, ENTRIES)
    # the span's ends count; attempt 1, a row sent after the end, one never sent, warm-up, drills, a step
    # without an entry and another arm's rows do not
    assert rows["request_id"].tolist() == ["first", "mid", "last", "s1"]
    assert rows.index.tolist() == [0, 1, 2, 3]
    assert superseded_mask(ROWS, ENTRIES).tolist() == [False, True] + [False] * 9


def test_no_journal_no_rows() -> None:
    assert counted_rows(ROWS, []).empty
    assert counted_rows(ROWS.iloc[0:0], ENTRIES).empty
