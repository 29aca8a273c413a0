"""Rollback rules as pure functions, at their edges: windows judged with intervals, too few samples, tail-only
regressions, earns-its-keep with the family controlled, errors shown by exact tests."""

from __future__ import annotations

import numpy as np

from harness.config.rules import BudgetRule, EarnsKeepRule, RegressionRule
from harness.decision.evidence import StepSample, regression_step
from harness.decision.rules.budget import WindowValue, evaluate_budget
from harness.decision.rules.errors import evaluate_errors
from harness.decision.rules.keep import evaluate_earns_keep
from harness.schema.intervals import Percentiles, QuantileCI
from harness.schema.summary import StepSummary
from harness.stats.intervals import quantile_interval

RNG = np.random.default_rng(7)


def win(i: int, lo: float | None, hi: float | None, requests: int = 400, value: float = 100.0) -> WindowValue:
    return WindowValue(index=i, step=i // 3, start_s=10.0 * i, end_s=10.0 * (i + 1), requests=requests,
                       value_ms=value,
                       ci=QuantileCI(lo=lo, hi=hi, resolved=lo is not None and hi is not None, n=requests))


def step(index: int, p99: float, lo: float | None, hi: float | None, duration: float = 60.0) -> StepSummary:
    ci = QuantileCI(lo=lo, hi=hi, resolved=lo is not None and hi is not None, n=100)
    return StepSummary(index=index, label=f"c{index}", duration_s=duration, requests=100,
                       ttft_ms=Percentiles(p99=p99, p99_ci=ci, count=100))


RULE = BudgetRule(metric="ttft", breach_windows=3, of_last=5, critical=True)


def test_sustained_breach_needs_resolved_windows() -> None:
    ws = [win(0, 50, 90), win(1, 150, 200, value=170), win(2, 60, 95), win(3, 160, 180), win(4, 170, 190),
          win(5, 40, 80)]
    out = evaluate_budget(RULE, 100.0, ws, [], 5, 10.0)
    assert out.result.status == "breach" and out.breached == [1, 3, 4] and out.result.critical
    assert "whole interval above the budget" in out.result.message


def test_point_breaches_whose_intervals_reach_the_budget_are_not_breaches() -> None:
    # every window's point value is over the budget but its interval reaches below it: unresolved, not breach
    ws = [win(i, 80, 400, value=150) for i in range(5)]
    out = evaluate_budget(RULE, 100.0, ws, [step(0, 150, 80, 400)], 5, 10.0)
    assert out.result.status == "unresolved" and out.breached == [] and len(out.unresolved) == 5


def test_isolated_breaches_pass_when_nothing_else_could_make_them_sustained() -> None:
    ws = [win(i, 150, 160) if i in (0, 4, 8) else win(i, 40, 60) for i in range(9)]
    out = evaluate_budget(RULE, 100.0, ws, [], 5, 10.0)
    assert out.result.status == "pass" and "3 isolated breach(es)" in out.result.message


def test_too_few_windows_for_a_sustained_breach_are_not_a_pass() -> None:
    out = evaluate_budget(RULE, 1.0, [win(0, 100, 200)], [step(0, 150, 100, 200, duration=6.0)], 5, 5.0)
    assert out.result.status == "unresolved"  # over budget, but too short to call sustained: never a pass


def test_windows_too_small_fall_back_to_steps_never_a_silent_pass() -> None:
    ws = [win(i, 40, None, requests=30) for i in range(6)]  # p99 from 30 requests: "at least 40"
    out = evaluate_budget(RULE, 100.0, ws, [step(0, 70, 50, None), step(1, 80, 60, None)], 5, 10.0)
    assert out.result.status == "unresolved" and "could not be judged" in out.result.message
    resolved = evaluate_budget(RULE, 100.0, ws, [step(0, 70, 50, None), step(1, 80, 60, 95)], 5, 10.0)
    assert resolved.result.status == "pass" and "latency rises with load" in resolved.result.message
    above = evaluate_budget(RULE, 100.0, ws, [step(0, 70, 50, 90), step(1, 300, 200, 400)], 5, 10.0)
    assert above.result.status == "breach" and above.result.step == 1


def sample(ttft: np.ndarray, keys: np.ndarray | None = None, duration: float = 60.0) -> StepSample:
    n = len(ttft)
    return StepSample(ttft=ttft, e2e=ttft * 2, itl=np.full(n, 20.0),
                      keys=np.asarray(keys if keys is not None else [str(i) for i in range(n)]),
                      tokens=np.full(n, 32.0), good=np.ones(n), duration_s=duration)


def test_tail_only_regression_is_breached_where_mann_whitney_sees_nothing() -> None:
    base = RNG.lognormal(np.log(200), 0.3, 3000)
    arm = base.copy()
    slow = RNG.random(3000) < 0.03
    arm[slow] *= 4.0  # 3% of requests stall behind a slow disk: p99 up, the median untouched
    rule = RegressionRule(metric="ttft", percentile=99, max_ratio=1.1)
    verdict = regression_step(rule, 0, "c8", sample(arm), sample(base), alpha_each=0.025)
    assert verdict.judged and verdict.result.status == "breach", verdict.result.message
    assert verdict.result.interval is not None and verdict.result.interval.lo is not None
    assert verdict.result.interval.lo > 1.1
    assert "Mann-Whitney" in verdict.result.message and "not deciding" in verdict.result.message


def test_regression_too_few_to_resolve_is_not_judged_and_a_straddle_is_unresolved() -> None:
    rule = RegressionRule(metric="ttft", percentile=99, max_ratio=1.1)
    small = regression_step(rule, 0, "c2", sample(RNG.lognormal(5, 0.3, 40)), sample(RNG.lognormal(5, 0.3, 40)), 0.025)
    assert not small.judged and small.result.status == "unresolved" and "needed" in small.result.message
    base = RNG.lognormal(5, 0.5, 600)
    same = regression_step(rule, 0, "c8", sample(base * RNG.lognormal(0, 0.3, 600)), sample(base), 0.025)
    assert same.judged and same.result.status in ("unresolved", "pass")


def keep_inputs(improve: float, n: int = 800) -> tuple[list[StepSummary], dict[int, StepSample], dict[int, StepSample]]:
    base = RNG.lognormal(np.log(500), 0.4, n)
    arm = base / improve * RNG.lognormal(0, 0.05, n)
    steps = [StepSummary(index=0, label="c8", requests=n, duration_s=60.0)]
    return steps, {0: sample(arm)}, {0: sample(base)}


def test_earns_keep_passes_only_when_the_interval_clears_the_threshold() -> None:
    rule = EarnsKeepRule(measures=["ttft_p95"], min_improvement=1.05)
    steps, mine, theirs = keep_inputs(1.5)
    result = evaluate_earns_keep(rule, steps, mine, theirs, "baseline", n_steps=1)
    assert result.status == "pass" and result.interval is not None and (result.interval.lo or 0) >= 1.05
    steps, mine, theirs = keep_inputs(1.04)  # a point estimate near 1.05 is not evidence of 1.05
    assert evaluate_earns_keep(rule, steps, mine, theirs, "baseline", n_steps=1).status in ("unresolved", "breach")


def test_earns_keep_false_pass_rate_under_the_null_is_at_most_alpha() -> None:
    rule = EarnsKeepRule(measures=["ttft_p50", "ttft_p95"], min_improvement=1.05, alpha=0.05)
    passes = 0
    trials = 60
    for _ in range(trials):
        n = 300
        base = RNG.lognormal(np.log(500), 0.5, n)
        arm = RNG.lognormal(np.log(500 / 1.05), 0.5, n)  # exactly at the threshold: the hardest null
        steps = [StepSummary(index=0, label="c8", requests=n, duration_s=60.0)]
        keys = np.asarray([f"x{i}" for i in range(n)])
        result = evaluate_earns_keep(rule, steps, {0: sample(arm, keys)}, {0: sample(base, keys)}, "b", n_steps=1)
        passes += result.status == "pass"
    assert passes / trials <= 0.10  # alpha 5%, with room for the 60-trial binomial noise


def test_error_rule_needs_exact_evidence() -> None:
    def st(errors: int, requests: int = 400) -> StepSummary:
        return StepSummary(index=0, label="c8", requests=requests, errors=errors)

    assert evaluate_errors(0.01, [st(40)], [st(0)], "baseline").status == "breach"
    assert evaluate_errors(0.01, [st(6)], [st(0)], "baseline").status == "unresolved"  # 1.5%: not shown
    assert evaluate_errors(0.01, [st(2)], [st(0)], "baseline").status == "pass"
    assert evaluate_errors(0.01, [st(40)], [st(40)], "baseline").status == "unresolved"  # shared: not the tier


def test_order_statistic_intervals_cover_at_their_level() -> None:
    hits = 0
    trials = 400
    true_p95 = float(np.exp(0.4 * 1.6448536))
    for _ in range(trials):
        ci = quantile_interval(RNG.lognormal(0, 0.4, 200), 0.95, 0.95)
        hits += ci.lo is not None and ci.hi is not None and ci.lo <= true_p95 <= ci.hi
    assert hits / trials >= 0.92
    assert not quantile_interval(RNG.random(40), 0.99).resolved  # p99 from 40: at least, never exact
