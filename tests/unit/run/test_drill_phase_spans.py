"""How a drill's load is cut into phases: at each action's mark, with an action's own duration left out of every
phase when it is set apart (a cache-loss deletion), and marks outside the load clamped to its edges."""

from __future__ import annotations

from harness.run.drill_load import Edge, Mark, phase_spans

START: Edge = (1_000, 10)
END: Edge = (9_000, 90)


def _mark(fired: int, ended: int | None = None) -> Mark:
    return (fired, fired // 100), (None if ended is None else (ended, ended // 100))


def test_a_plain_mark_cuts_the_load_in_two() -> None:
    spans = phase_spans(START, END, [_mark(4_000)], 2)
    assert [(lo[0], hi[0]) for lo, hi in spans] == [(1_000, 4_000), (4_000, 9_000)]


def test_an_action_set_apart_belongs_to_no_phase() -> None:
    spans = phase_spans(START, END, [_mark(4_000, 6_500)], 2)
    assert [(lo[0], hi[0]) for lo, hi in spans] == [(1_000, 4_000), (6_500, 9_000)]
    assert spans[1][0][1] == 65, "the phase starts at the wall reading taken when the action ended"


def test_an_action_that_outlasts_the_load_leaves_an_empty_last_phase() -> None:
    spans = phase_spans(START, END, [_mark(4_000, 12_000)], 2)
    assert [(lo[0], hi[0]) for lo, hi in spans] == [(1_000, 4_000), (9_000, 9_000)]


def test_spans_beyond_the_last_phase_join_it_and_marks_outside_the_load_mark_its_edge() -> None:
    spans = phase_spans(START, END, [_mark(500), _mark(5_000), _mark(7_000)], 2)
    assert [(lo[0], hi[0]) for lo, hi in spans] == [(1_000, 1_000), (1_000, 9_000)]
    assert phase_spans(START, END, [], 3) == [(START, END)]
    assert phase_spans(START, END, [_mark(3_000)], 0) == []
