"""Apply the scenario's rules to one arm's measurements (client records, step tables, windows)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.config.arms import Arm
from harness.config.rules import BudgetRule, LatencyMetric
from harness.config.scenario import Scenario
from harness.rollout.rules import (
    WindowValue,
    evaluate_budget,
    evaluate_earns_keep,
    evaluate_errors,
    evaluate_regression,
)
from harness.summary import RuleResult, StepSummary, WindowPoint

_WINDOW_FIELD = {"ttft": "ttft_p99_ms", "itl": "itl_p99_ms", "e2e": "e2e_p99_ms"}


def per_request_values(df: pd.DataFrame, metric: LatencyMetric) -> pd.Series:
    """Per-request latency in ms: TTFT, end-to-end, or the request's mean inter-token gap."""
    if df.empty:
        return pd.Series(dtype=float)
    ok = df[df["error_kind"].isna()] if "error_kind" in df else df
    if metric == "ttft":
        return pd.to_numeric(ok["ttft_ms"], errors="coerce").dropna()
    if metric == "e2e":
        return pd.to_numeric(ok["e2e_ms"], errors="coerce").dropna()

    def mean_gap(chunks: object) -> float:
        arr = np.asarray(chunks if chunks is not None else [], dtype=np.int64)
        return float(np.diff(arr).mean() / 1e6) if arr.size >= 2 else np.nan

    return ok["chunk_ns"].map(mean_gap).dropna()


def _window_values(rule: BudgetRule, wins: Sequence[WindowPoint]) -> list[WindowValue]:
    field = _WINDOW_FIELD[rule.metric]
    return [WindowValue(index=i, step=w.step, start_s=w.start_s, end_s=w.end_s, requests=w.requests,
                        value_ms=getattr(w, field)) for i, w in enumerate(wins)]


def _judged_steps_decide(per_step: list[RuleResult]) -> list[RuleResult]:
    """A regression rule is inconclusive only when it could judge no step at all: steps with too few samples are
    reported but do not decide once another step was judged (low load levels are naturally small)."""
    if not any(r.status in ("pass", "breach") for r in per_step):
        return per_step
    return [r.model_copy(update={"status": "not-applicable", "message": f"not judged: {r.message}"})
            if r.status == "inconclusive" else r for r in per_step]


def _applies(names: list[str] | None, arm: Arm) -> bool:
    return names is None or arm.name in names


def evaluate_arm_rules(scenario: Scenario, arm: Arm, index: int, arm_df: pd.DataFrame, base_df: pd.DataFrame,
                       wins: list[WindowPoint], steps: Sequence[StepSummary], prev_steps: Sequence[StepSummary],
                       prev_name: str | None) -> tuple[list[RuleResult], list[WindowPoint], set[str]]:
    """All rule results for the arm, its windows with breached rules marked, and the budget rules it breached."""
    rules = scenario.rules
    results: list[RuleResult] = []
    breached_budgets: set[str] = set()
    marks: dict[int, list[str]] = {}
    for rule in rules.budgets:
        if not _applies(rule.arms, arm):
            continue
        budget = rule.budget_ms or scenario.slo.budget_ms(rule.metric)
        if budget is None:
            results.append(RuleResult(rule=rule.label, kind="budget", status="not-applicable", critical=rule.critical,
                                      dry_run=rule.dry_run, message=f"no budget: set budget_ms or slo.{rule.metric}"
                                      "_p99_ms"))
            continue
        if rule.percentile != 99.0:
            results.append(RuleResult(rule=rule.label, kind="budget", status="not-applicable", critical=rule.critical,
                                      dry_run=rule.dry_run, message="windowed budgets are computed on p99; set "
                                      "percentile: 99"))
            continue
        result, idx = evaluate_budget(rule, budget, _window_values(rule, wins), rules.min_requests_per_window)
        results.append(result)
        for i in idx:
            marks.setdefault(i, []).append(rule.label)
        if result.status == "breach":
            breached_budgets.add(rule.label)
    if index > 0:
        base_steps = {s.index: s for s in steps}
        for reg in rules.regression:
            if not _applies(reg.arms, arm):
                continue
            per_step: list[RuleResult] = []
            for step_index in sorted(base_steps):
                step = base_steps[step_index]
                a = per_request_values(arm_df[arm_df["step"] == step_index], reg.metric) if not arm_df.empty \
                    else pd.Series(dtype=float)
                b = per_request_values(base_df[base_df["step"] == step_index], reg.metric) if not base_df.empty \
                    else pd.Series(dtype=float)
                per_step.append(evaluate_regression(reg, step_index, step.label, a.tolist(), b.tolist()))
            results += _judged_steps_decide(per_step)
        if prev_name is not None:
            results.append(evaluate_errors(rules.max_error_rate, steps, prev_steps, prev_name))
        if rules.earns_keep is not None and prev_name is not None:
            results.append(evaluate_earns_keep(rules.earns_keep, steps, prev_steps, prev_name))
    marked = [w.model_copy(update={"breached": sorted(set(w.breached) | set(marks.get(i, [])))})
              for i, w in enumerate(wins)]
    return results, marked, breached_budgets
