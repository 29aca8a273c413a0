"""Per tested history, the smallest level shift the change-point rule finds at that history's measured spread.

A quiet drift report says nothing moved by more than this; the figure comes from
:func:`harness.stats.detectability.detectability` (simulated histories of the same length, noise at the measured
run-to-run spread rounded up, the history's alpha, the same rule), within the index build's simulation budget.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from harness.stats import detectability as sim


class ShiftFound(BaseModel):
    """A planted shift and how many of the simulated histories it was found in."""

    model_config = ConfigDict(extra="forbid")
    shift: float  # 0.2: the level rose by 20%
    found: int
    sims: int


class DetectableShift(BaseModel):
    """The smallest shift found in at least ``power`` of the simulated histories (None: none of those tried)."""

    model_config = ConfigDict(extra="forbid")
    spread_simulated: float  # the noise simulated: the measured spread rounded up
    power: float
    planted_at: int  # the first run of the planted level (mid-history)
    smallest: ShiftFound | None
    below: ShiftFound | None  # the next smaller shift tried, found less often
    tried: list[ShiftFound] = Field(default_factory=list)
    method: str = sim.METHOD


class _Series(Protocol):
    @property
    def runs(self) -> int: ...
    @property
    def spread(self) -> float | None: ...
    @property
    def alpha(self) -> float | None: ...


def _found(power: sim.ShiftPower | None) -> ShiftFound | None:
    return None if power is None else ShiftFound(shift=power.shift, found=power.found, sims=power.sims)


def detectable_shift(series: _Series, estimator: sim.Estimator) -> DetectableShift | None:
    """The figure for one tested history (None: no spread or alpha, or the simulation budget is spent)."""
    if series.spread is None or series.alpha is None:
        return None
    result = estimator(series.runs, series.spread, series.alpha)
    if result is None:
        return None
    return DetectableShift(spread_simulated=result.spread, power=result.power, planted_at=result.at,
                           smallest=_found(result.smallest), below=_found(result.below),
                           tried=[ShiftFound(shift=t.shift, found=t.found, sims=t.sims) for t in result.tried])


def detectable_text(shift: DetectableShift | None) -> str:
    """``15% (34 of 40 simulated; 10%: 15 of 40)``, ``more than 200% (...)``, or why there is no figure."""
    if shift is None:
        return "not estimated (the index's simulation budget was spent on other histories)"
    below = f"; {_pct(shift.below.shift)}: {shift.below.found} of {shift.below.sims}" if shift.below else ""
    if shift.smallest is None:
        if not shift.tried:
            return "not estimated"
        largest = max(shift.tried, key=lambda t: t.shift)
        return (f"more than {_pct(largest.shift)} (a {_pct(largest.shift)} shift: {largest.found} of "
                f"{largest.sims} simulated)")
    return f"{_pct(shift.smallest.shift)} ({shift.smallest.found} of {shift.smallest.sims} simulated{below})"


def _pct(share: float) -> str:
    return f"{share:.1%}".replace(".0%", "%")
