"""Section 6 of ``make perf`` (the virtual clock): its rows from the benches' outcomes, without running rollouts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tools.perf import virtual_clock
from tools.perf.benches import BenchRun


def _fake(returncode: int | None, wall_s: float, body: dict[str, Any] | None = None) -> Any:
    def run_bench(module: str, args: list[str], timeout_s: float) -> BenchRun:
        if body is not None:
            out = Path(args[args.index("--out") + 1])
            (out / "calibration.json").write_text(json.dumps(body), encoding="utf-8")
        return BenchRun([module, *args], returncode, "", wall_s)
    return run_bench


@pytest.mark.parametrize("code", [0, 1, 3, 5])
def test_a_demo_that_reached_a_verdict_is_measured(monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    monkeypatch.setattr(virtual_clock, "run_bench", _fake(code, 21.5))
    row = virtual_clock.demo_row(60.0)
    assert row.value == 21.5 and row.error is None and f"exit {code}" in (row.note or "")
    assert row.passed is False, "21.5 s misses the 20 s goal"


@pytest.mark.parametrize("code", [2, 4, None])
def test_a_demo_that_failed_or_timed_out_has_no_figure(monkeypatch: pytest.MonkeyPatch, code: int | None) -> None:
    monkeypatch.setattr(virtual_clock, "run_bench", _fake(code, 61.0))
    row = virtual_clock.demo_row(60.0)
    assert row.value is None and row.error


def test_the_aa_rate_counts_judged_and_lost_rollouts_over_the_bench_wall_time(monkeypatch: pytest.MonkeyPatch) -> None:
    body = {"wall_s": 120.0, "decisions": [{"case": "aa", "n": 38, "lost": 2, "seconds_per_rollout": 5.5}]}
    monkeypatch.setattr(virtual_clock, "run_bench", _fake(0, 125.0, body))
    row = virtual_clock.aa_rate_row(40, 2, 600.0)
    assert row.value == pytest.approx(20.0) and row.unit == "rollouts/min"
    assert row.passed is False, "20 per minute misses 400 in 15 minutes"
    assert "33 s steps" in row.note


def test_unreadable_aa_figures_are_an_error_not_a_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(virtual_clock, "run_bench", _fake(0, 10.0, {"wall_s": 10.0, "decisions": []}))
    row = virtual_clock.aa_rate_row(4, 2, 60.0)
    assert row.value is None and "could not be read" in (row.error or "")
    assert row.passed is False, "a figure that could not be measured never passes its goal"


def test_figures_inside_their_goals_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(virtual_clock, "run_bench", _fake(3, 19.0))
    assert virtual_clock.demo_row(60.0).passed is True
    body = {"wall_s": 60.0, "decisions": [{"case": "aa", "n": 30, "lost": 0, "seconds_per_rollout": 4.0}]}
    monkeypatch.setattr(virtual_clock, "run_bench", _fake(0, 65.0, body))
    assert virtual_clock.aa_rate_row(30, 2, 600.0).passed is True  # 30 per minute
