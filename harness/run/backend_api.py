"""The clock and the drill-facing part of an arm's backend (:mod:`harness.run.backend`), apart so that
:class:`harness.run.arm_handle.ArmHandle` can name them without an import circle."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from harness.load.step import StepOutcome, StepRun


class Clock(Protocol):
    """Where a run's stamps come from: the monotonic clock of step spans and records, and wall time."""

    def mono_ns(self) -> int:
        """Monotonic nanoseconds (``time.perf_counter_ns`` on the real clock)."""

    def wall_ns(self) -> int:
        """Wall-clock nanoseconds (``time.time_ns`` on the real clock)."""


class Sampling(Protocol):
    """A scraper or host sampler: started once, stopped once."""

    def start(self) -> None:
        """Begin."""

    def stop(self) -> None:
        """End (idempotent)."""


class StepScraper(Sampling, Protocol):
    """The arm's scraper: polls on its own, and scrapes at the boundaries it is asked for."""

    def scrape_now(self, tag: str) -> None:
        """One scrape of every endpoint now, tagged."""


class Timed(Protocol):
    """A drill load's timed actions (:class:`harness.run.drill_load.PhaseTimer`)."""

    def start(self) -> None:
        """Fire the actions in real time, from now."""

    def finish(self) -> list[tuple[tuple[int, int], tuple[int, int] | None]]:
        """Stop; the marks so far (when each action fired and, for one set apart from the phases, when it ended)."""

    def plan(self) -> list[tuple[float, Any]]:
        """The same work as (seconds after the load starts, what to do): what a virtual clock runs."""


class DrillBackend(Protocol):
    """What a drill and a capacity probe use of the arm's backend: its clock, steps, and the disk tiers."""

    clock: Clock

    def run_step(self, req: StepRun, cancel: threading.Event | None, timer: Timed | None = None) -> StepOutcome:
        """Run one step (with a drill's timed actions)."""

    def clear_disk_tiers(self, tiers: Sequence[Path]) -> int:
        """Delete the disk tiers' contents (a cache-loss drill); the entries removed."""

    def count_disk_entries(self, tiers: Sequence[Path]) -> int:
        """Files and directories in the disk tiers (what a restart keeps)."""

    def drill_skip(self, kind: str) -> str | None:
        """Why a drill of this kind does not run with this backend (None: it runs)."""
