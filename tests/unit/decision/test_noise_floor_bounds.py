"""The noise floor as it is used: every regression and earns-its-keep result carries the bound a pass needs and the
bound a breach needs (``pass_bound`` / ``breach_bound``) and its message names them as numbers; a floor above a
regression rule's tolerance makes the rule say it cannot rule the regression out (reason code
``floor-above-tolerance``), never silently demand an improvement. The intervals are fixed here (the comparisons'
interval functions are replaced), so only the bounds are under test."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

from harness.config.rules import EarnsKeepRule, RegressionRule
from harness.decision import evidence
from harness.decision.bounds import KeepBounds, RegressionBounds, floor_at
from harness.decision.effects import regression_rows, settle_factor
from harness.decision.evaluate import RegressionComparison
from harness.decision.evidence import StepSample, regression_step
from harness.decision.rules import keep
from harness.decision.rules.keep import KeepEvaluation, judge_earns_keep
from harness.report.fmt_ci import threshold_text
from harness.schema.intervals import RatioCI
from harness.schema.summary import StepSummary

RULE = RegressionRule(metric="ttft", percentile=90, max_ratio=1.10, min_samples=20)


def ci(lo: float, hi: float, ratio: float | None = None) -> RatioCI:
    return RatioCI(ratio=ratio if ratio is not None else math.sqrt(lo * hi), lo=lo, hi=hi, resolved=True,
                   confidence=0.99, method="fixed for the test")


def sample(n: int = 400, value: float = 100.0) -> StepSample:
    ones = np.full(n, value)
    return StepSample(ttft=ones, e2e=ones, itl=ones, keys=np.array([f"k{i}" for i in range(n)]), tokens=ones,
                      good=np.ones(n), duration_s=20.0)


@pytest.fixture
def interval(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[RatioCI]]:
    """The regression's interval, whatever the samples: set ``interval[0]``."""
    box = [ci(0.9, 1.0)]
    monkeypatch.setattr(evidence, "quantile_ratio", lambda *args, **kwargs: box[0])
    yield box


# --- the bounds themselves --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("floor", "pass_bound", "breach_bound", "above"), [
    (1.0, 1.10, 1.10, False),               # no floor: both bounds are the limit
    (1.05, 1.10 / 1.05, 1.10 * 1.05, False),  # floor below the tolerance: a pass still allows a little harm
    (1.157, 1.10 / 1.157, 1.10 * 1.157, True),  # floor above it: a pass would need a shown improvement
])
def test_regression_bounds_are_the_limit_divided_and_multiplied_by_the_floor(
        floor: float, pass_bound: float, breach_bound: float, above: bool) -> None:
    b = RegressionBounds(1.10, floor)
    assert math.isclose(b.pass_bound, pass_bound) and math.isclose(b.breach_bound, breach_bound)
    assert b.floor_above_tolerance is above


def test_the_bounds_text_names_the_numbers_the_interval_is_held_against() -> None:
    assert RegressionBounds(1.10, 1.157).text() == ("passes if the upper end <= 0.951 (1.10 / floor 1.157); "
                                                    "breaches if the lower end > 1.273 (1.10 x 1.157)")
    assert RegressionBounds(1.10).text() == "passes if the upper end <= 1.100; breaches if the lower end > 1.100"
    assert KeepBounds(1.05, 1.06).text() == ("shown if the lower end >= 1.113 (1.05 x floor 1.060); short if the "
                                            "upper end < 1.113")
    assert math.isclose(KeepBounds(1.05, 1.06).need, 1.113)


def test_floor_at_falls_back_to_the_largest_measured_floor_then_to_one() -> None:
    assert floor_at(None, 2) == 1.0 and floor_at({}, 2) == 1.0
    assert floor_at({0: 1.02, 1: 1.08}, 1) == 1.08 and floor_at({0: 1.02, 1: 1.08}, 2) == 1.08


# --- regression results carry them ------------------------------------------------------------------------------


def _judge(floor: float) -> evidence.StepVerdict:
    return regression_step(RULE, 1, "c16", sample(), sample(), 0.004, floor)


@pytest.mark.parametrize("floor", [1.0, 1.05, 1.157])
def test_every_regression_result_carries_both_bounds_and_the_floor(interval: list[RatioCI], floor: float) -> None:
    for lo, hi in ((0.5, 0.6), (0.9, 1.2), (1.5, 1.9)):
        interval[0] = ci(lo, hi)
        r = _judge(floor).result
        assert r.pass_bound == round(1.10 / floor, 4) and r.breach_bound == round(1.10 * floor, 4)
        assert r.floor == floor and r.threshold == 1.10
        assert f"passes if the upper end <= {1.10 / floor:.3f}" in r.message
        assert f"breaches if the lower end > {1.10 * floor:.3f}" in r.message
        assert "x noise floor" not in r.message  # the old wording read as 1.10 x 1.157 for both sides


def test_below_the_tolerance_the_floor_narrows_the_pass_and_widens_the_breach(interval: list[RatioCI]) -> None:
    interval[0] = ci(0.9, 1.04)  # <= 1.10 / 1.05 = 1.048
    assert _judge(1.05).result.status == "pass"
    interval[0] = ci(0.9, 1.06)  # within the plain limit, not within it divided by the floor
    r = _judge(1.05).result
    assert r.status == "unresolved" and r.reason_code is None and "straddles" in r.message
    interval[0] = ci(1.12, 1.3)  # above the limit, not above it times the floor (1.155)
    assert _judge(1.05).result.status == "unresolved"
    interval[0] = ci(1.16, 1.3)
    assert _judge(1.05).result.status == "breach"


def test_at_floor_one_the_bounds_are_the_rule_limit(interval: list[RatioCI]) -> None:
    interval[0] = ci(0.9, 1.10)
    r = _judge(1.0).result
    assert r.status == "pass" and r.pass_bound == r.breach_bound == 1.10 and r.reason_code is None
    interval[0] = ci(1.101, 1.3)
    assert _judge(1.0).result.status == "breach"


def test_a_floor_above_the_tolerance_says_it_cannot_rule_the_regression_out(interval: list[RatioCI]) -> None:
    interval[0] = ci(0.85, 1.0)  # no harm seen, yet the upper end is above 1.10 / 1.157 = 0.951
    r = _judge(1.157).result
    assert r.status == "unresolved" and r.reason_code == "floor-above-tolerance"
    assert "cannot rule out a regression at this noise floor" in r.message
    assert "quieter host" in r.message and "longer A/A" in r.message
    assert r.pass_bound == round(1.10 / 1.157, 4) and r.pass_bound < 1.0


def test_a_floor_above_the_tolerance_still_passes_an_improvement_beyond_the_drift(interval: list[RatioCI]) -> None:
    interval[0] = ci(0.7, 0.9)  # 0.9 x 1.157 = 1.04 <= 1.10: no regression even with all the drift
    r = _judge(1.157).result
    assert r.status == "pass" and r.reason_code is None and "even at this noise floor" in r.message
    interval[0] = ci(1.3, 1.5)  # beyond 1.10 x 1.157 = 1.273: harm beyond the drift
    assert _judge(1.157).result.status == "breach"


def test_the_effect_rows_and_the_report_show_the_same_bounds(interval: list[RatioCI]) -> None:
    interval[0] = ci(0.9, 1.1, ratio=1.0)  # the point between 1.10 / 1.157 and 1.10 x 1.157: load cannot settle it
    result = _judge(1.157).result
    st = StepSummary(index=1, label="c16", duration_s=20.0, requests=400)
    [row] = regression_rows([RegressionComparison(RULE, st, result, 1.157, 400, 400, 200)], "baseline")
    assert row.limit == result.breach_bound and row.pass_limit == result.pass_bound
    assert row.reason_code == "floor-above-tolerance" and row.outcome == "not settled"
    assert row.limit_text == "max_ratio 1.10 x floor 1.157; 1.10 / floor 1.157"
    factor, way = settle_factor(row)
    assert factor is None and "quieter host" in way
    assert threshold_text(result) == "pass ≤ 0.951, breach > 1.273"
    interval[0] = ci(0.5, 0.6)
    assert threshold_text(_judge(1.0).result) == "1.10x"  # no floor: one limit


# --- earns its keep ---------------------------------------------------------------------------------------------


def _keep(monkeypatch: pytest.MonkeyPatch, interval_: RatioCI, floor: float | None) -> KeepEvaluation:
    monkeypatch.setattr(keep, "improvement", lambda *args, **kwargs: interval_)
    rule = EarnsKeepRule(measures=["output_tokens_per_s"], min_improvement=1.05, min_samples=10)
    st = StepSummary(index=0, label="c8", duration_s=20.0, requests=400)
    floors = {0: floor} if floor is not None else None
    return judge_earns_keep(rule, [st], {0: sample()}, {0: sample()}, "baseline", n_steps=1, floors=floors)


@pytest.mark.parametrize(("floor", "need"), [(None, 1.05), (1.0, 1.05), (1.06, 1.05 * 1.06)])
def test_earns_keep_needs_min_improvement_times_the_floor_and_says_so(monkeypatch: pytest.MonkeyPatch,
                                                                      floor: float | None, need: float) -> None:
    shown = _keep(monkeypatch, ci(need + 0.001, need + 0.2), floor).result
    assert shown.status == "pass" and shown.pass_bound == shown.breach_bound == round(need, 4)
    assert f"needs the lower end >= {need:.3f}" in shown.message
    if floor is not None and floor > 1.0:
        assert f"(1.05 x that step's noise floor {floor:.3f})" in shown.message
    short = _keep(monkeypatch, ci(need - 0.2, need - 0.01), floor).result
    assert short.status == "breach" and short.breach_bound == round(need, 4)
    open_ = _keep(monkeypatch, ci(need - 0.01, need + 0.2), floor).result
    assert open_.status == "unresolved" and open_.pass_bound == round(need, 4)
