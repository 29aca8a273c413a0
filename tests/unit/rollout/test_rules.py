"""Rollback rules as pure functions: sustained budgets, baseline regression, earns-its-keep."""

from __future__ import annotations

import numpy as np

from harness.config.rules import BudgetRule, EarnsKeepRule, RegressionRule
from harness.rollout.rules import WindowValue, evaluate_budget, evaluate_earns_keep, evaluate_regression
from harness.summary import HitTokens, Percentiles, StepSummary


def windows(values: list[float | None], requests: int = 20) -> list[WindowValue]:
    return [WindowValue(index=i, step=i // 3, start_s=10.0 * i, end_s=10.0 * (i + 1), requests=requests, value_ms=v)
            for i, v in enumerate(values)]


def test_sustained_breach_needs_n_of_last_m() -> None:
    rule = BudgetRule(metric="ttft", breach_windows=3, of_last=5, critical=True)
    result, idx = evaluate_budget(rule, 100.0, windows([50, 150, 60, 160, 170, 40]), 5)
    assert result.status == "breach"
    assert idx == [1, 3, 4]
    assert "3 of the last" in result.message and "10-20 s" in result.message and "170 ms" in result.message
    assert result.critical


def test_isolated_breaches_are_not_sustained() -> None:
    rule = BudgetRule(metric="ttft", breach_windows=3, of_last=5)
    result, idx = evaluate_budget(rule, 100.0, windows([150, 50, 50, 50, 150, 50, 50, 50, 150]), 5)
    assert result.status == "pass"
    assert idx == [0, 4, 8]
    assert "3 isolated breach(es)" in result.message


def test_windows_with_too_few_requests_are_inconclusive_not_passed() -> None:
    rule = BudgetRule(metric="itl", breach_windows=3, of_last=5)
    result, _ = evaluate_budget(rule, 100.0, windows([500, 500, 500], requests=2), 5)
    assert result.status == "inconclusive"


def test_regression_significant_and_over_limit_breaches() -> None:
    rng = np.random.default_rng(1)
    base = rng.normal(100, 5, 200)
    slow = rng.normal(150, 5, 200)
    result = evaluate_regression(RegressionRule(metric="ttft", max_ratio=1.1), 1, "c4", slow.tolist(), base.tolist())
    assert result.status == "breach"
    assert "ratio 1.4" in result.message and "Mann-Whitney" in result.message


def test_regression_within_limit_passes_and_small_samples_inconclusive() -> None:
    rng = np.random.default_rng(2)
    base = rng.normal(100, 5, 200)
    same = rng.normal(100, 5, 200)
    rule = RegressionRule(metric="ttft", max_ratio=1.1, min_samples=30)
    assert evaluate_regression(rule, 0, "c1", same.tolist(), base.tolist()).status == "pass"
    few = evaluate_regression(rule, 0, "c1", same[:10].tolist(), base.tolist())
    assert few.status == "inconclusive" and "10 arm" in few.message


def step(index: int, ttft_p95: float, tps: float, requests: int = 100, gpu: int = 100, miss: int = 900) -> StepSummary:
    return StepSummary(index=index, label=f"c{index}", requests=requests,
                       ttft_ms=Percentiles(p50=ttft_p95 / 2, p95=ttft_p95, p99=ttft_p95 * 1.2, count=requests),
                       output_tokens_per_s=tps, hit_tokens=HitTokens(gpu=gpu, cpu=0, disk=0, miss=miss))


def test_earns_keep_passes_on_a_big_enough_improvement() -> None:
    rule = EarnsKeepRule(measures=["ttft_p95", "output_tokens_per_s"], min_improvement=1.1)
    result = evaluate_earns_keep(rule, [step(0, 100, 50), step(1, 80, 50)], [step(0, 100, 50), step(1, 120, 50)],
                                 "baseline")
    assert result.status == "pass"
    assert "ttft_p95" in result.message and "1.50x" in result.message


def test_earns_keep_holds_when_nothing_improves_enough() -> None:
    rule = EarnsKeepRule(measures=["ttft_p95", "hit_rate"], min_improvement=1.1)
    result = evaluate_earns_keep(rule, [step(0, 100, 50)], [step(0, 102, 50)], "baseline")
    assert result.status == "breach"
    assert "does not earn its keep" in result.message


def test_earns_keep_inconclusive_without_samples() -> None:
    rule = EarnsKeepRule(min_samples=50)
    result = evaluate_earns_keep(rule, [step(0, 10, 50, requests=5)], [step(0, 100, 50)], "baseline")
    assert result.status == "inconclusive"


def test_error_rate_rule_blames_only_new_failures() -> None:
    from harness.rollout.rules import evaluate_errors

    bad = step(0, 100, 50)
    bad.errors, bad.errors_by_kind = 12, {"stalled": 12}
    clean = step(0, 100, 50)
    result = evaluate_errors(0.01, [bad], [clean], "cpu")
    assert result.status == "breach" and result.critical
    assert "12 of 100" in result.message and "stalled 12" in result.message
    assert evaluate_errors(0.01, [bad], [bad], "cpu").status == "pass"  # the arm before failed as much
