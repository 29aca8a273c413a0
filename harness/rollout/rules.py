"""Rollback rules, as pure functions over measured values.

* **Budget** — windowed percentile latency against a budget; *sustained* means ``breach_windows`` of the last
  ``of_last`` windows with enough requests breached. Windows with too few requests neither breach nor pass.
* **Regression** — the arm against the baseline at the same step: the percentile ratio must stay within
  ``max_ratio``; a breach needs the ratio over the limit AND a one-sided Mann-Whitney U test (arm slower) below
  ``alpha``. Too few samples on either side is *inconclusive*, never a pass.
* **Earns its keep** — the newest tier must improve at least one named measure by ``min_improvement`` against the
  arm without it, at some step with enough samples; otherwise the arm is ``hold``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import mannwhitneyu

from harness.config.rules import BudgetRule, EarnsKeepRule, RegressionRule
from harness.summary import RuleResult, StepSummary


@dataclass(frozen=True)
class WindowValue:
    """One window's percentile for one metric."""

    index: int
    step: int
    start_s: float
    end_s: float
    requests: int
    value_ms: float | None


def _fmt(ms: float | None) -> str:
    return "n/a" if ms is None else (f"{ms:.0f} ms" if ms >= 100 else f"{ms:.1f} ms")


def evaluate_budget(rule: BudgetRule, budget_ms: float, windows: Sequence[WindowValue],
                    min_requests: int) -> tuple[RuleResult, list[int]]:
    """Sustained-breach test; returns the result and the indices of breached windows."""
    usable = [w for w in windows if w.requests >= min_requests and w.value_ms is not None]
    breached = [w for w in usable if w.value_ms is not None and w.value_ms > budget_ms]
    breached_idx = [w.index for w in breached]
    if len(usable) < rule.breach_windows:
        return RuleResult(rule=rule.label, kind="budget", status="inconclusive", critical=rule.critical,
                          dry_run=rule.dry_run,
                          message=f"only {len(usable)} window(s) had at least {min_requests} requests; "
                          f"{rule.breach_windows} are needed to judge p{rule.percentile:g} {rule.metric} against "
                          f"{_fmt(budget_ms)}"), breached_idx
    bad = {w.index for w in breached}
    for end in range(len(usable)):
        recent = usable[max(0, end - rule.of_last + 1): end + 1]
        hits = [w for w in recent if w.index in bad]
        if len(hits) >= rule.breach_windows:
            worst = max(hits, key=lambda w: w.value_ms or 0.0)
            spans = ", ".join(f"{w.start_s:.0f}-{w.end_s:.0f} s ({_fmt(w.value_ms)})" for w in hits)
            return RuleResult(rule=rule.label, kind="budget", status="breach", critical=rule.critical,
                              dry_run=rule.dry_run, step=worst.step,
                              message=f"p{rule.percentile:g} {rule.metric.upper()} broke its {_fmt(budget_ms)} "
                              f"budget in {len(hits)} of the last {len(recent)} windows (sustained: "
                              f"{rule.breach_windows} of {rule.of_last}); windows {spans}; worst "
                              f"{_fmt(worst.value_ms)} at step {worst.step}"), breached_idx
    worst_val = max((w.value_ms or 0.0 for w in usable), default=0.0)
    return RuleResult(rule=rule.label, kind="budget", status="pass", critical=rule.critical, dry_run=rule.dry_run,
                      message=f"p{rule.percentile:g} {rule.metric.upper()} stayed within {_fmt(budget_ms)} "
                      f"(sustained test {rule.breach_windows} of {rule.of_last}); {len(breached)} isolated "
                      f"breach(es) in {len(usable)} windows; worst window {_fmt(worst_val)}"), breached_idx


def evaluate_regression(rule: RegressionRule, step: int, step_label: str, arm_values: Sequence[float],
                        base_values: Sequence[float]) -> RuleResult:
    """Arm vs baseline at one step."""
    a = np.asarray([v for v in arm_values if math.isfinite(v)], dtype=float)
    b = np.asarray([v for v in base_values if math.isfinite(v)], dtype=float)
    name = f"p{rule.percentile:g} {rule.metric.upper()}"
    if len(a) < rule.min_samples or len(b) < rule.min_samples:
        return RuleResult(rule=rule.label, kind="regression", status="inconclusive", critical=rule.critical,
                          dry_run=rule.dry_run, step=step,
                          message=f"step {step} ({step_label}): {len(a)} arm and {len(b)} baseline samples; "
                          f"{rule.min_samples} each are needed to compare {name}")
    pa, pb = float(np.percentile(a, rule.percentile)), float(np.percentile(b, rule.percentile))
    ratio = pa / pb if pb > 0 else math.inf
    p_value = float(mannwhitneyu(a, b, alternative="greater").pvalue)
    detail = (f"step {step} ({step_label}): {name} {_fmt(pa)} vs baseline {_fmt(pb)} (ratio {ratio:.2f}, limit "
              f"{rule.max_ratio:.2f}; Mann-Whitney U one-sided p={p_value:.3g}, n={len(a)}/{len(b)})")
    if ratio > rule.max_ratio and p_value < rule.alpha:
        return RuleResult(rule=rule.label, kind="regression", status="breach", critical=rule.critical,
                          dry_run=rule.dry_run, step=step, message=f"regressed: {detail}")
    verdict = "within limit" if ratio <= rule.max_ratio else f"over the limit but not significant at {rule.alpha:g}"
    return RuleResult(rule=rule.label, kind="regression", status="pass", critical=rule.critical,
                      dry_run=rule.dry_run, step=step, message=f"{verdict}: {detail}")


LOWER_IS_BETTER = {"ttft_p50", "ttft_p95", "ttft_p99", "itl_p95", "itl_p99", "e2e_p95", "e2e_p99"}


def measure(step: StepSummary, name: str) -> float | None:
    """A named measure of a step (None when not measured)."""
    metric, _, pct = name.partition("_p")
    if metric in ("ttft", "itl", "e2e") and pct:
        perc = getattr(step, f"{metric}_ms")
        return getattr(perc, f"p{pct}", None)
    if name == "output_tokens_per_s":
        return step.output_tokens_per_s
    if name == "hit_rate":
        return step.hit_tokens.hit_rate()
    if name == "goodput":
        return step.goodput
    raise KeyError(name)


def evaluate_earns_keep(rule: EarnsKeepRule, arm_steps: Sequence[StepSummary], prev_steps: Sequence[StepSummary],
                        prev_name: str) -> RuleResult:
    """Did the newest tier improve anything enough at some step?"""
    best: tuple[float, str] | None = None
    compared = 0
    by_index = {s.index: s for s in prev_steps}
    for step in arm_steps:
        other = by_index.get(step.index)
        if other is None or step.requests < rule.min_samples or other.requests < rule.min_samples:
            continue
        compared += 1
        for name in rule.measures:
            mine, theirs = measure(step, name), measure(other, name)
            if mine is None or theirs is None:
                continue
            if name in LOWER_IS_BETTER:
                ratio = theirs / mine if mine > 0 else math.inf
            else:
                ratio = mine / theirs if theirs > 0 else (math.inf if mine > 0 else 1.0)
            text = (f"{name} {mine:.3g} vs {theirs:.3g} on {prev_name} at step {step.index} ({step.label}), "
                    f"{ratio:.2f}x")
            if best is None or ratio > best[0]:
                best = (ratio, text)
    if compared == 0 or best is None:
        return RuleResult(rule="earns-its-keep", kind="earns_keep", status="inconclusive",
                          message=f"no step had {rule.min_samples}+ requests in both this arm and {prev_name} with "
                          f"the measures {', '.join(rule.measures)}")
    if best[0] >= rule.min_improvement:
        return RuleResult(rule="earns-its-keep", kind="earns_keep", status="pass",
                          message=f"earns its keep: {best[1]} (needs {rule.min_improvement:.2f}x)")
    return RuleResult(rule="earns-its-keep", kind="earns_keep", status="breach",
                      message=f"does not earn its keep: best improvement {best[1]}, below the "
                      f"{rule.min_improvement:.2f}x required on any of {', '.join(rule.measures)}")


def evaluate_errors(max_rate: float, arm_steps: Sequence[StepSummary], prev_steps: Sequence[StepSummary],
                    prev_name: str) -> RuleResult:
    """The newest tier must not bring failures: a step over ``max_rate`` errors where the arm before it was within."""
    prev = {s.index: s for s in prev_steps}
    worst: tuple[float, str] | None = None
    for step in arm_steps:
        if step.requests == 0:
            continue
        rate = step.errors / step.requests
        other = prev.get(step.index)
        other_rate = other.errors / other.requests if other is not None and other.requests else 0.0
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(step.errors_by_kind.items())) or "unclassified"
        text = (f"step {step.index} ({step.label}): {step.errors} of {step.requests} requests failed ({rate:.1%}; "
                f"{kinds}) vs {other_rate:.1%} on {prev_name}")
        if rate > max_rate and other_rate <= max_rate and (worst is None or rate > worst[0]):
            worst = (rate, text)
    if worst is not None:
        return RuleResult(rule="error-rate", kind="errors", status="breach", critical=True,
                          message=f"the tier brings failures: {worst[1]}; limit {max_rate:.1%}")
    return RuleResult(rule="error-rate", kind="errors", status="pass",
                      message=f"no step's error rate rose above {max_rate:.1%} where {prev_name} stayed within it")
