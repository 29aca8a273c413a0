"""The smallest shift the change-point rule finds, by simulation: monotone in the spread, seeded, within a budget.

Known answers (the same rule, 40 simulated 30-run histories per shift, alpha 0.05/9, shift planted mid-history): at
2% spread a 7.5-10% shift is found 80% of the time, at 16% spread it takes 30-50%; a 20% shift is found less often
as the spread grows.
"""

from __future__ import annotations

import pytest

from harness.stats import changepoint
from harness.stats import detectability as d

ALPHA = 0.05 / 9
SPREADS = (0.02, 0.04, 0.08, 0.16)


def test_detectable_shift_grows_with_the_spread() -> None:
    found = [d.detectability(30, s, ALPHA) for s in SPREADS]
    smallest = [f.smallest.shift if f.smallest else float("inf") for f in found]
    assert smallest == sorted(smallest) and smallest[0] < smallest[-1]
    assert 0.05 <= smallest[0] <= 0.10 and 0.3 <= smallest[-1] <= 0.5
    for f in found:  # the figure is what was simulated: found in at least 80%, the shift below it less often
        assert f.smallest is not None and f.smallest.found >= d.POWER * f.smallest.sims
        assert f.below is None or (f.below.shift < f.smallest.shift and f.below.rate < d.POWER)
    power_at_20 = [d.shift_power(30, s, 0.20, ALPHA).found for s in SPREADS]
    assert power_at_20 == sorted(power_at_20, reverse=True) and power_at_20[0] > power_at_20[-1]


def test_seeded_and_bucketed_up() -> None:
    assert d.detectability(20, 0.05, ALPHA) == d.detectability(20, 0.05, ALPHA)
    assert [d.spread_bucket(s) for s in (0.0, 0.0001, 0.04, 0.0401, 0.1, 0.31)] == [0.0, 0.001, 0.04, 0.05, 0.1,
                                                                                     0.315]


def test_estimator_caches_and_keeps_to_its_budget() -> None:
    estimator = d.Estimator(budget=d.Estimator().cost(20) + 1)
    first = estimator(20, 0.041, ALPHA)
    assert first is not None and first.spread == pytest.approx(0.05)
    assert estimator(20, 0.049, ALPHA) is first  # the same bucket: cached, nothing spent
    assert estimator(20, 0.09, ALPHA) is None  # a new bucket: past the budget
    assert estimator(changepoint.MIN_RUNS - 1, 0.04, ALPHA) is None  # too short to be tested at all
