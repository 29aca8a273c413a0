"""The arithmetic of power before the run: resolution by order statistics, the rules' error rates, and the
lognormal detectable ratio (checked against the rule's own bootstrap in a small simulation)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.plan.power.resolve import (
    detectable_ratio,
    duration_for,
    highest_resolvable,
    needed,
    pass_limit,
    ranks_of,
    sample_percentiles,
    sigma_from_quantiles,
)
from harness.stats.error_rates import keep_alpha, regression_alpha
from harness.stats.intervals import quantile_ratio


def test_40_requests_cannot_resolve_p99_and_368_can_at_95_percent() -> None:
    assert ranks_of(40, 0.99, 0.95) is None
    assert ranks_of(367, 0.99, 0.95) is None
    assert ranks_of(368, 0.99, 0.95) == (360, 368)
    assert needed(0.99, 0.95) == 368
    assert needed(0.95, 0.95) == 72
    assert needed(0.5, 0.95, min_samples=30) == 30  # a rule's min_samples wins when larger


def test_the_test_level_follows_the_rules_family_and_looks() -> None:
    # three steps, four sequential looks: one-sided 0.05 / 12, read off a two-sided 1 - 2 alpha interval
    alpha = regression_alpha(0.05, 3, 4)
    assert alpha == pytest.approx(0.05 / 12)
    assert needed(0.99, 1 - 2 * alpha) > needed(0.99, 1 - 2 * regression_alpha(0.05, 3, 1)) > needed(0.99, 0.95)
    assert keep_alpha(0.05, 3, 2, 1) == pytest.approx(0.05 / 6)


def test_ranks_read_as_sample_percentiles() -> None:
    ranks = ranks_of(1000, 0.95, 0.95)
    assert ranks is not None
    lo, hi = sample_percentiles(1000, ranks)  # type: ignore[misc]
    assert 93.0 < lo < 95.0 < hi < 97.0


def test_highest_resolvable_and_duration() -> None:
    assert highest_resolvable(40, 0.95) == 90.0
    assert highest_resolvable(400, 0.95) == 99.0
    assert highest_resolvable(400, 0.95, below=99.0) == 98.0
    assert highest_resolvable(3, 0.95) is None
    assert duration_for(546, 30.0) == 20.0  # 18.2 s rounded up to 5 s
    assert duration_for(1, 100.0) == 5.0


def test_sigma_from_quantiles() -> None:
    assert sigma_from_quantiles(100.0, 100.0 * math.exp(1.6448536 * 0.5)) == pytest.approx(0.5, abs=1e-6)
    assert sigma_from_quantiles(100.0, 90.0) is None and sigma_from_quantiles(None, 1.0) is None


def test_detectable_ratio_shrinks_with_requests_and_is_none_when_unresolved() -> None:
    alpha = 0.05 / 12
    assert detectable_ratio(40, 0.99, alpha, 0.5, 1.1, 0.8) is None
    small = detectable_ratio(500, 0.95, alpha, 0.5, 1.1, 0.8)
    large = detectable_ratio(2000, 0.95, alpha, 0.5, 1.1, 0.8)
    assert small is not None and large is not None and 1.1 < large < small
    limit = pass_limit(2000, 0.95, alpha, 0.5, 0.8)
    assert limit is not None and large == pytest.approx(1.1 * limit)


def test_detectable_ratio_matches_the_rules_bootstrap_roughly() -> None:
    """At the detectable ratio the rule's own interval clears the limit in about `power` of lognormal samples."""
    alpha, n, sigma = 0.05 / 6, 400, 0.5
    ratio = detectable_ratio(n, 0.95, alpha, sigma, 1.1, 0.8)
    assert ratio is not None
    rng = np.random.default_rng(7)
    trials = 40
    hits = 0
    for _ in range(trials):
        a = np.exp(rng.normal(math.log(ratio), sigma, n))
        b = np.exp(rng.normal(0.0, sigma, n))
        ci = quantile_ratio(a, b, 0.95, 1 - 2 * alpha)
        hits += int(ci.lo is not None and ci.lo > 1.1)
    assert 0.6 <= hits / trials <= 1.0
