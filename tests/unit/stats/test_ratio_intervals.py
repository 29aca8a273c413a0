"""Ratio intervals: the n they compared, pairing only when asked for equal-length aligned samples, a block bootstrap
that widens with dependence, throughput from a window's time bins."""

from __future__ import annotations

import numpy as np
import pytest

from harness.stats.intervals import binned, invert, quantile_ratio, sum_ratio
from tools.bench.coverage import ar1_lognormal


def test_unpaired_ratio_carries_both_sample_sizes_and_its_method() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.lognormal(np.log(120), 0.5, 600), rng.lognormal(np.log(100), 0.5, 450)
    a[:3] = np.nan  # NaN dropped
    ci = quantile_ratio(a, b, 0.9)
    assert ci.resolved and (ci.n, ci.n_versus, ci.paired) == (597, 450, False)
    assert ci.ratio == pytest.approx(np.nanquantile(a, 0.9) / np.quantile(b, 0.9))
    assert "arms resampled independently" in ci.method and "block" in ci.method
    inv = invert(ci)
    assert (inv.n, inv.n_versus) == (597, 450) and inv.ratio == pytest.approx(1 / ci.ratio)


def test_paired_ratio_needs_aligned_samples_and_is_narrower_for_the_same_requests() -> None:
    rng = np.random.default_rng(1)
    prompt = rng.lognormal(np.log(100), 0.6, 500)  # the request's own cost, shared by both arms
    a = prompt * 1.2 * rng.lognormal(0, 0.05, 500)
    b = prompt * rng.lognormal(0, 0.05, 500)
    paired = quantile_ratio(a, b, 0.5, paired=True)
    unpaired = quantile_ratio(a, b, 0.5)
    assert paired.paired and paired.n == paired.n_versus == 500 and "paired by request" in paired.method
    assert paired.lo is not None and paired.hi is not None and unpaired.lo is not None and unpaired.hi is not None
    assert paired.hi / paired.lo < unpaired.hi / unpaired.lo
    with pytest.raises(ValueError, match="same length"):
        quantile_ratio(a, b[:400], 0.5, paired=True)


def test_block_bootstrap_is_wider_than_iid_on_a_correlated_series() -> None:
    rng = np.random.default_rng(2)
    a = ar1_lognormal(rng, 500, np.log(100), 0.6, 0.8)
    b = ar1_lognormal(rng, 500, np.log(100), 0.6, 0.8)
    iid = quantile_ratio(a, b, 0.5, method="iid")
    block = quantile_ratio(a, b, 0.5, method="circular")
    assert iid.lo and iid.hi and block.lo and block.hi
    assert np.log(block.hi / block.lo) > 1.5 * np.log(iid.hi / iid.lo)  # clearly wider (log width)


def test_a_rebuild_draws_the_same_interval() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.lognormal(size=400), rng.lognormal(size=400)
    assert quantile_ratio(a, b, 0.95) == quantile_ratio(a.copy(), b.copy(), 0.95)


def test_unresolved_quantile_gives_no_interval_but_names_the_samples() -> None:
    ci = quantile_ratio(np.ones(40), np.ones(40), 0.99)
    assert not ci.resolved and ci.lo is None and (ci.n, ci.n_versus) == (40, 40) and "needs" in (ci.note or "")


def test_throughput_ratio_over_time_bins_counts_requests_not_bins() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.poisson(90, 120).astype(float), rng.poisson(60, 120).astype(float)
    ci = sum_ratio(a, b, 12.0, 12.0, n=640, n_versus=430, unit="completed requests")
    assert ci.resolved and ci.ratio == pytest.approx(a.sum() / b.sum()) and (ci.n, ci.n_versus) == (640, 430)
    assert ci.lo is not None and ci.hi is not None and ci.lo < 1.5 < ci.hi
    few = sum_ratio(a, b, 12.0, 12.0, n=8, n_versus=430, unit="completed requests")
    assert not few.resolved and "8 and 430 completed requests" in (few.note or "")


def test_binned_sums_weights_per_equal_bin_inside_the_window() -> None:
    times = np.array([0, 5, 10, 15, 19, 20, 25], dtype=np.int64)
    weights = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 100.0])
    out = binned(times, weights, 0, 20, 4)
    assert out.tolist() == [1.0, 2.0, 3.0, 15.0]  # the end is inside the last bin; 25 is outside
    assert binned(times, weights, 5, 5, 4).size == 0
