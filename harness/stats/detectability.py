"""The smallest level shift the change-point rule finds in a history like a given one, by simulation.

A results index with no change point says nothing moved *by more than the rule can see*; how much that is depends on
the history's length and its run-to-run spread. :func:`detectability` answers it with the rule itself
(:func:`harness.stats.changepoint.detect`, at the history's own alpha): ``sims`` seeded log-normal histories of the
same length, with the noise at the measured spread, get a planted step up by each shift of :data:`SHIFT_GRID` in the
middle of the history (the most favourable place; a shift among the newest runs needs more); a shift is *found* when
a change point lands within one run of the planted one. The smallest grid shift found in at least :data:`POWER` of
the simulated histories is the figure (None: none on the grid is), searched by bisection (power rises with the
shift). The same standard-normal draws serve every spread and shift (common random numbers), so the figure moves
monotonically with the spread and the index does not flicker.

Cost: the rule's PELT search grows with the square of the runs (about 4 ms a history at 30 runs, 20 ms at 60). An
:class:`Estimator` caches by (runs, spread rounded up to :data:`SPREAD_GRID`, alpha) and spends at most a budget in
simulated runs squared per index build; past it, histories are left unestimated (None), deterministically.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from harness.stats import changepoint

POWER = 0.8  # the share of simulated histories in which a shift must be found to count as detectable
SIMS = 40  # simulated histories per shift tried
SHIFT_GRID = (0.05, 0.075, 0.10, 0.15, 0.20, 0.30, 0.50, 1.00, 2.00)  # planted shifts (x1.05 .. x3)
SEED = 20250101
# Spreads are rounded *up* to this series (R10, per decade), so that the figure errs towards a larger blind spot.
_R10 = (1.0, 1.25, 1.6, 2.0, 2.5, 3.15, 4.0, 5.0, 6.3, 8.0)
MIN_SPREAD = 0.001
BUDGET = 3 * 160 * 60 * 60  # simulated runs squared per index build: three full searches of 60-run histories
_GRID_TEXT = ", ".join(f"{s * 100:g}%" for s in SHIFT_GRID)
METHOD = (f"{SIMS} seeded log-normal histories of the history's length with its run-to-run spread (rounded up), a "
          f"step up planted mid-history; the smallest of {_GRID_TEXT} that the same change-point rule, at the "
          f"history's alpha, finds within one run of where it was planted in at least {POWER:.0%} of them")


def spread_bucket(spread: float) -> float:
    """``spread`` rounded up to :data:`_R10` (0 stays 0; tiny spreads become :data:`MIN_SPREAD`)."""
    if not math.isfinite(spread) or spread <= 0.0:
        return 0.0
    spread = max(spread, MIN_SPREAD)
    decade = 10.0 ** math.floor(math.log10(spread))
    for step in (*_R10, 10.0):
        value = round(step * decade, 12)
        if value >= spread * (1 - 1e-9):
            return value
    return round(10.0 * decade, 12)  # pragma: no cover - the loop ends at the next decade


@dataclass(frozen=True)
class ShiftPower:
    """How often a planted shift was found: ``found`` of ``sims`` simulated histories."""

    shift: float
    found: int
    sims: int

    @property
    def rate(self) -> float:
        return self.found / self.sims if self.sims else 0.0


@dataclass(frozen=True)
class Detectability:
    """The smallest detectable shift for one (runs, spread, alpha), with the grid shifts tried."""

    runs: int
    spread: float  # the noise simulated (SD of the log figures), the measured spread rounded up
    alpha: float
    at: int  # where the shift was planted (the first run of the new level, oldest 0)
    power: float
    tried: tuple[ShiftPower, ...]  # in grid order

    @property
    def smallest(self) -> ShiftPower | None:
        """The smallest shift tried that was found at least :attr:`power` of the time."""
        return next((t for t in self.tried if t.rate >= self.power), None)

    @property
    def below(self) -> ShiftPower | None:
        """The largest shift tried below :attr:`smallest` (found less often), if one was tried."""
        smallest = self.smallest
        misses = [t for t in self.tried if t.rate < self.power and (smallest is None or t.shift < smallest.shift)]
        return misses[-1] if misses else None


def _noise(runs: int, sims: int, seed: int) -> NDArray[np.float64]:
    """Standard-normal draws shared by every spread and shift (common random numbers)."""
    return np.random.default_rng([seed, runs]).standard_normal((sims, runs))


def shift_power(runs: int, spread: float, shift: float, alpha: float, *, sims: int = SIMS,
                seed: int = SEED) -> ShiftPower:
    """How many of ``sims`` simulated histories with a planted ``shift`` the rule finds (within one run)."""
    at = runs // 2
    noise = _noise(runs, sims, seed)
    found = 0
    for i in range(sims):
        x = 1000.0 * np.exp(spread * noise[i])
        x[at:] *= 1.0 + shift
        test = changepoint.detect(x, alpha=alpha, seed=i)
        found += any(abs(c.index - at) <= 1 and c.ratio > 1.0 for c in test.change_points)
    return ShiftPower(shift=shift, found=found, sims=sims)


def detectability(runs: int, spread: float, alpha: float, *, sims: int = SIMS, power: float = POWER,
                  grid: tuple[float, ...] = SHIFT_GRID, seed: int = SEED) -> Detectability:
    """The smallest grid shift found in at least ``power`` of ``sims`` histories (bisection over ``grid``)."""
    tried: dict[int, ShiftPower] = {}
    lo, hi = 0, len(grid) - 1  # the answer is in grid[lo..hi], or none
    while lo <= hi:
        mid = (lo + hi) // 2
        tried[mid] = shift_power(runs, spread, grid[mid], alpha, sims=sims, seed=seed)
        if tried[mid].rate >= power:
            hi = mid - 1
        else:
            lo = mid + 1
    return Detectability(runs=runs, spread=spread, alpha=alpha, at=runs // 2, power=power,
                         tried=tuple(tried[k] for k in sorted(tried)))


@dataclass
class Estimator:
    """:func:`detectability` for one index build: cached by (runs, spread bucket, alpha), within a budget."""

    budget: int = BUDGET  # simulated runs squared
    sims: int = SIMS
    spent: int = 0
    _cache: dict[tuple[int, float, float], Detectability] = field(default_factory=dict)

    def cost(self, runs: int) -> int:
        """What a full search of a ``runs``-long history costs at most."""
        return math.ceil(math.log2(len(SHIFT_GRID) + 1)) * self.sims * runs * runs

    def __call__(self, runs: int, spread: float, alpha: float) -> Detectability | None:
        """The figure for a history (None: the budget is spent, or the history is too short to test)."""
        if runs < changepoint.MIN_RUNS or not math.isfinite(spread) or not 0.0 < alpha < 1.0:
            return None
        key = (runs, spread_bucket(spread), float(f"{alpha:.4g}"))
        if key in self._cache:
            return self._cache[key]
        cost = self.cost(runs)
        if self.spent + cost > self.budget:
            return None
        self.spent += cost
        found = self._cache[key] = detectability(runs, key[1], key[2], sims=self.sims)
        return found
