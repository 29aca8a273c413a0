"""The order-statistic percentile interval and the error-rate families, held to what they promise, by simulation.

A 95% interval for a percentile must cover the true percentile in at least ~95% of samples (exact binomial ranks:
distribution-free, so the check runs on a skewed lognormal, where a normal approximation would not hold), and the
family alphas must divide the rule's alpha by the family size and the looks.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest, lognorm

from harness.stats.error_rates import keep_alpha, regression_alpha
from harness.stats.intervals import interval_from_sorted, min_samples_to_resolve, quantile_ranks

SIGMA = 0.6


@pytest.mark.parametrize(("q", "n"), [(0.5, 60), (0.95, 400), (0.99, 600)])
def test_percentile_interval_covers_the_true_percentile_at_its_confidence(q: float, n: int) -> None:
    rng = np.random.default_rng(20261201)
    truth = float(lognorm.ppf(q, SIGMA))
    trials, covered, resolved = 1500, 0, 0
    for _ in range(trials):
        ci = interval_from_sorted(np.sort(rng.lognormal(0.0, SIGMA, n)), q, 0.95)
        if ci.resolved:
            resolved += 1
            assert ci.lo is not None and ci.hi is not None
            covered += ci.lo <= truth <= ci.hi
    assert resolved == trials  # n was chosen above the resolution threshold
    # coverage at least 95%: the one-sided test of "coverage < 0.95" must not reject at 1%
    assert binomtest(covered, trials, 0.95, alternative="less").pvalue > 0.01, covered / trials
    assert covered / trials < 0.995  # and not vacuous: the interval is not the whole sample


def test_too_few_samples_leave_the_upper_end_open() -> None:
    need = min_samples_to_resolve(0.99, 0.95)
    assert 200 < need < 600
    assert quantile_ranks(need, 0.99, 0.95).resolved and not quantile_ranks(need - 1, 0.99, 0.95).resolved
    ci = interval_from_sorted(np.arange(need - 1, dtype=np.float64), 0.99, 0.95)
    assert not ci.resolved and ci.hi is None and ci.lo is not None and "from above" in (ci.note or "")


def test_family_alphas_divide_by_the_family_and_the_looks() -> None:
    assert math.isclose(regression_alpha(0.05, 3, 1), 0.05 / 3)
    assert math.isclose(regression_alpha(0.05, 3, 4), 0.05 / 12)
    assert math.isclose(keep_alpha(0.05, 3, 2, 4), 0.05 / 24)
    assert regression_alpha(0.05, 0, 0) == 0.05  # an empty family still tests at the rule's alpha
