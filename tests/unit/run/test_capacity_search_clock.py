"""The capacity search's ``max_search_s`` is counted on the arm's own clock (``runner.backend.clock``): a search on a
clock whose probes take modelled seconds stops after the same probes however fast the host ran them, and a clock that
does not move (probes that took no time) never stops it early."""

from __future__ import annotations

import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from harness.config import load_scenario_text
from harness.config.steps import StepLevel
from harness.run import capacity
from harness.schema.capacity import CapacityProbe

DEMO = Path(__file__).resolve().parents[3] / "scenarios" / "demo-sim.yaml"
# rising probes 2, 4, 8, 16, 32, 64 users, each 10 modelled seconds, all meeting the budget
SEARCH = {"metric": "ttft", "percentile": 99, "budget_ms": 2000, "low": 2, "high": 64, "resolution": 1,
          "probe_duration_s": 10, "extend_factor": 1.0, "max_probes": 12}


class SteppedClock:
    """A clock that moves only when a step runs on it (as the virtual clock does)."""

    def __init__(self) -> None:
        self.now = 1_000_000_000_000

    def mono_ns(self) -> int:
        return self.now

    def wall_ns(self) -> int:
        return self.now


class Runner:
    """The parts of :class:`harness.run.arm_handle.ArmHandle` the search uses; each step takes ``level.duration_s``
    on its clock (or nothing, with ``moves=False``) and a little real time."""

    def __init__(self, search: dict[str, Any], *, moves: bool = True) -> None:
        data = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
        data["steps"]["search"] = search
        scenario = load_scenario_text(yaml.safe_dump(data), "s.yaml")
        self.said: list[str] = []
        self.ctx = SimpleNamespace(scenario=scenario, say=self.said.append, record_arm=lambda *a, **k: None)
        self.arm = scenario.arms[1]
        self.clock = SteppedClock()
        self.backend = SimpleNamespace(clock=self.clock)
        self.moves = moves
        self.loads: list[int | None] = []

    def run_journaled_step(self, server: Any, scraper: Any, tokenizer: Any, index: int, label: str,
                           level: StepLevel, journal_extra: dict[str, Any] | None = None) -> None:
        self.loads.append(level.concurrency)
        if self.moves:
            self.clock.now += int((level.duration_s or 0) * 1e9) + 2_000_000_000  # the step and its drain
        time.sleep(0.001)


@pytest.fixture(autouse=True)
def _judged_from_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """No journal or records: every probe meets, and there are no earlier sessions."""
    monkeypatch.setattr(capacity, "_earlier", lambda runner: [])
    monkeypatch.setattr(capacity, "_judge", lambda runner, spec, index, label: CapacityProbe(
        step=index, label=label, load=float(runner.loads[-1]), requests=100, n=100, value_ms=100.0,
        outcome="meets"))


def test_max_search_s_counts_the_arms_clock_not_the_hosts() -> None:
    runner = Runner({**SEARCH, "max_search_s": 30})
    assert capacity.run_search(runner, None, None, None) is None  # type: ignore[arg-type]
    # probes start at 0, 12 and 24 s of the arm's clock; at 36 s the 30 s are spent, whatever the wall time was
    assert runner.loads == [2, 4, 8]
    assert any("max_search_s (30 s) reached" in line for line in runner.said)


def test_a_clock_that_does_not_move_never_ends_the_search_early() -> None:
    runner = Runner({**SEARCH, "max_search_s": 0.001}, moves=False)  # each probe sleeps 1 ms of real time
    capacity.run_search(runner, None, None, None)  # type: ignore[arg-type]
    assert runner.loads == [2, 4, 8, 16, 32, 64]
    assert not any("max_search_s" in line for line in runner.said)
