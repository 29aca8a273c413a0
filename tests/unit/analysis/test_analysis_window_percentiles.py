"""Windows at the percentiles a budget rule may be judged at: p99 in its fields as before, p50 / p95 in
``WindowPoint.percentiles`` with their own order-statistic intervals, exact against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from analysis_helpers import BASE, MS, frame, record

from harness.analysis import analyze_arms, windows
from harness.config.rules import SloSpec
from harness.stats.intervals import quantile_interval

S = 1000.0  # ms per second
TTFTS = [10.0 * (k + 1) for k in range(100)]  # one window of 100 requests: p95 resolves, p99 does not
SPANS = [{"arm": "a", "step": 0, "start_ns": BASE, "end_ns": BASE + round(10 * S * MS)}]


def _frame():  # type: ignore[no-untyped-def]
    return frame([record("a", 0, 50.0 * k, ttft, [1.0 + k % 7, 2.0]) for k, ttft in enumerate(TTFTS)])


def test_a_window_at_p95_is_its_own_percentile_with_its_own_interval() -> None:
    (point,) = windows(_frame(), 10.0, steps=SPANS, percentiles=(95.0,))
    at = point.quantile("ttft", 95.0)
    assert at is not None and at.value_ms == pytest.approx(np.percentile(TTFTS, 95))
    assert at.value_ms != pytest.approx(point.ttft_p99_ms)
    want = quantile_interval(TTFTS, 0.95)
    assert at.ci is not None and (at.ci.lo, at.ci.hi, at.ci.resolved) == (want.lo, want.hi, True)
    assert point.ttft_p99_ms == pytest.approx(np.percentile(TTFTS, 99))  # p99 as before
    assert point.ttft_p99_ci is not None and not point.ttft_p99_ci.resolved  # 100 requests cannot bound p99
    e2e = point.quantile("e2e", 95.0)
    assert e2e is not None and e2e.value_ms is not None and e2e.value_ms > at.value_ms
    gaps = [g for k in range(len(TTFTS)) for g in (1.0 + k % 7, 2.0)]
    itl = point.quantile("itl", 95.0)
    assert itl is not None and itl.value_ms == pytest.approx(np.percentile(gaps, 95), rel=1e-6)
    assert set(point.percentiles) == {"ttft_p95", "itl_p95", "e2e_p95"}


def test_without_other_percentiles_a_window_holds_p99_only() -> None:
    (point,) = windows(_frame(), 10.0, steps=SPANS)
    assert point.percentiles == {} and point.quantile("ttft", 95.0) is None
    assert point.quantile("ttft", 99.0) is not None


def test_analyze_arms_gives_every_budget_percentile_with_identical_p99s() -> None:
    slo = SloSpec(ttft_p99_ms=500.0)
    (with_all,) = analyze_arms(_frame(), slo, 10.0, steps=SPANS)["a"].windows
    (p99_only,) = analyze_arms(_frame(), slo, 10.0, steps=SPANS, window_percentiles=())["a"].windows
    assert set(with_all.percentiles) == {f"{m}_p{p}" for m in ("ttft", "itl", "e2e") for p in (50, 95)}
    assert with_all.model_copy(update={"percentiles": {}}) == p99_only
    p50 = with_all.quantile("ttft", 50.0)
    assert p50 is not None and p50.value_ms == pytest.approx(np.percentile(TTFTS, 50))
