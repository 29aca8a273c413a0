"""MSER-5: the truncation against a direct evaluation of White's formula, a transient found, short series left alone."""

from __future__ import annotations

import numpy as np
import pytest

from harness.stats.warmup import BATCH, MIN_BATCHES, mser5, mser_curve


def _direct(z: np.ndarray, d: int) -> float:
    """MSER(d) as White (1997) writes it: the sum of squared deviations of the kept batch means over (m - d)^2."""
    kept = z[d:]
    return float(((kept - kept.mean()) ** 2).sum() / len(kept) ** 2)


def test_curve_matches_the_formula_at_every_truncation() -> None:
    z = np.random.default_rng(3).lognormal(5.0, 0.7, 60) + np.linspace(400.0, 0.0, 60) ** 1.5 / 50
    curve = mser_curve(z)
    assert curve == pytest.approx([_direct(z, d) for d in range(len(z))], rel=1e-9, abs=1e-12)


def test_a_transient_is_cut_and_the_cut_minimises_mser_over_the_first_half() -> None:
    rng = np.random.default_rng(7)
    series = rng.lognormal(np.log(100.0), 0.3, 600)
    series[:60] += 400.0  # the first 60 requests (12 batches) are a burst
    t = mser5(series)
    z = series[: (len(series) // BATCH) * BATCH].reshape(-1, BATCH).mean(axis=1)
    half = len(z) // 2
    expected = min(range(half + 1), key=lambda d: _direct(z, d))
    assert t.cut == expected * BATCH
    assert 55 <= t.cut <= 75 and t.settled and t.note is None


def test_stationary_series_are_barely_cut() -> None:
    cuts = [mser5(np.random.default_rng(s).lognormal(4.0, 0.5, 500)).cut for s in range(20)]
    assert np.median(cuts) <= 25  # MSER removes little from a series without a transient


def test_a_short_series_is_not_cut_and_says_why() -> None:
    t = mser5(np.arange(MIN_BATCHES * BATCH - 1, dtype=float)[::-1])
    assert t.cut == 0 and not t.settled and t.note is not None and "needs 50" in t.note


def test_a_trend_to_the_end_is_reported_not_settled() -> None:
    t = mser5(np.linspace(1000.0, 0.0, 400) + np.random.default_rng(1).normal(0, 1, 400))
    assert not t.settled and t.note is not None and "second half" in t.note
    assert t.cut <= (400 // BATCH // 2) * BATCH  # never more than the first half


def test_nan_is_refused() -> None:
    with pytest.raises(ValueError, match="NaN"):
        mser5([1.0, float("nan")] * 40)
