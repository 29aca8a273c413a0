"""Bootstrap replicates drawn by arch: counts that reproduce numpy's quantiles of the resampled values, seeds from
the data, blocks that grow with the series' dependence, paired series sharing their indices."""

from __future__ import annotations

import numpy as np
import pytest

from harness.stats.resample import METHODS, block_length, draw
from tools.bench.coverage import ar1_lognormal


@pytest.mark.parametrize("method", METHODS)
def test_replicate_quantiles_are_numpys_quantiles_of_the_resampled_values(method: str) -> None:
    x = np.random.default_rng(0).lognormal(size=301)
    d = draw(x, method=method, replicates=50)  # type: ignore[arg-type]
    assert d.counts.shape == (50, 301) and (d.counts.sum(axis=1) == 301).all()
    for r in (0, 17, 49):
        resampled = np.repeat(x, d.counts[r])
        for q in (0.5, 0.9, 0.95, 0.99):
            assert d.quantile(x, q)[r] == pytest.approx(np.quantile(resampled, q), rel=1e-12)
        assert d.total(x)[r] == pytest.approx(resampled.sum(), rel=1e-12)


def test_the_same_data_draws_the_same_replicates_and_other_data_others() -> None:
    x = np.random.default_rng(1).lognormal(size=200)
    a = draw(x, method="circular", replicates=40, tag="t")
    b = draw(x.copy(), method="circular", replicates=40, tag="t")
    assert np.array_equal(a.counts, b.counts)
    assert not np.array_equal(a.counts, draw(x, method="circular", replicates=40, tag="other").counts)
    assert not np.array_equal(a.counts, draw(x[::-1], method="circular", replicates=40, tag="t").counts)


def test_block_length_grows_with_dependence_and_is_one_for_iid() -> None:
    rng = np.random.default_rng(2)
    iid = [block_length(ar1_lognormal(rng, 500, 0.0, 0.6, 0.0), method="circular") for _ in range(5)]
    dependent = [block_length(ar1_lognormal(rng, 500, 0.0, 0.6, 0.8), method="circular") for _ in range(5)]
    assert max(iid) <= 4 < 10 <= min(dependent)
    assert block_length(np.arange(500.0), method="iid") == 1.0
    assert block_length(np.ones(500), method="stationary") == 1.0  # no variation: nothing to estimate
    assert block_length(ar1_lognormal(rng, 100, 0.0, 0.6, 0.99), method="circular") <= 10.0  # at most n / 10


def test_circular_blocks_are_runs_of_neighbours() -> None:
    x = np.arange(400.0)
    d = draw(x, method="circular", replicates=5, block=20)
    assert d.block == 20.0
    drawn = np.flatnonzero(d.counts[0])  # a replicate holds whole runs of 20 consecutive observations (circularly)
    runs = np.split(drawn, np.flatnonzero(np.diff(drawn) != 1) + 1)
    assert all(len(run) >= 20 or run[0] == 0 or run[-1] == 399 for run in runs)


def test_paired_series_share_one_draw_and_must_have_one_length() -> None:
    x, y = np.arange(100.0), np.arange(100.0) * 2
    d = draw(x, y, method="stationary", replicates=30)
    assert np.allclose(d.total(y), 2 * d.total(x))  # the same indices for both
    with pytest.raises(ValueError, match="same length"):
        draw(x, y[:50], method="iid")
    with pytest.raises(ValueError, match="empty"):
        draw(np.zeros(0), method="iid")


@pytest.mark.parametrize(("method", "n", "block"), [("iid", 301, None), ("circular", 301, 7.0), ("circular", 97, 1.0),
                                                    ("circular", 640, 39.0), ("circular", 13, 5.0)])
def test_vectorised_draws_are_archs_update_indices_one_replicate_at_a_time(method: str, n: int,
                                                                           block: float | None) -> None:
    from arch.bootstrap import CircularBlockBootstrap, IIDBootstrap

    from harness.stats.resample import seed_of

    x = np.random.default_rng(n).lognormal(size=n)
    d = draw(x, method=method, replicates=60, tag="vec", block=block)  # type: ignore[arg-type]
    generator = np.random.default_rng(seed_of(x, tag="vec"))
    boot = IIDBootstrap(x, seed=generator) if method == "iid" else \
        CircularBlockBootstrap(int(d.block), x, seed=generator)
    expected = np.stack([np.bincount(boot.update_indices(), minlength=n) for _ in range(60)])
    assert np.array_equal(d.counts, expected)


def test_remembered_quantiles_are_the_computed_ones_per_values_and_q() -> None:
    x = np.random.default_rng(3).lognormal(size=250)
    y = np.random.default_rng(4).lognormal(size=250)
    d = draw(x, y, method="circular", replicates=60, tag="memo")
    first = d.quantile(x, 0.95)
    assert d.quantile(x.copy(), 0.95) is first  # the same values and q: remembered
    assert not first.flags.writeable  # shared, so read-only
    for values, q in ((x, 0.5), (y, 0.95), (x, 0.99)):  # other values or q: computed, not mixed up
        got = d.quantile(values, q)
        want = np.array([np.quantile(np.repeat(values, d.counts[r]), q) for r in range(d.replicates)])
        assert np.allclose(got, want, rtol=1e-12, atol=0)
    assert not np.array_equal(d.quantile(y, 0.95), first)
