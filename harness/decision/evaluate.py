"""Apply the scenario's rules to one arm's measurements (client records, step tables, windows).

The same functions judge a finished run (``harness report``) and a sequential step at a look
(:mod:`harness.decision.sequential`), so a step that ended early is judged on the evidence that ended it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pandas as pd

from harness.config.arms import Arm
from harness.config.rules import BudgetRule, RegressionRule, SloSpec
from harness.config.scenario import Scenario
from harness.decision.bounds import floor_at
from harness.decision.evidence import StepSample, regression_step, step_sample
from harness.decision.rules.budget import WindowValue, evaluate_budget
from harness.decision.rules.causal import own_tier_hits
from harness.decision.rules.errors import evaluate_errors
from harness.decision.rules.keep import KeepEvaluation, judge_earns_keep
from harness.decision.rules.load_host import REASON, clean_steps, contended_pairs, contended_text, set_aside
from harness.decision.rules.tier_health import evaluate_tier_health
from harness.schema.intervals import RatioCI
from harness.schema.summary import RuleResult, StepSummary
from harness.schema.windows import WindowPoint, window_key
from harness.stats.error_rates import regression_alpha
from harness.stats.intervals import min_samples_to_resolve


def planned_steps(scenario: Scenario) -> frozenset[int]:
    """The steps whose requests run on a planned schedule, the same in every arm: open-loop rate steps, a trace
    replayed by its timestamps, fixed-count (``requests:``) steps. Only there may two arms be paired by plan key (and
    only when both served every request: :func:`harness.decision.evidence.paired_values`)."""
    trace = scenario.workload.trace
    by_trace = trace is not None and trace.mode == "timestamps"
    return frozenset(i for i, level in enumerate(scenario.steps.levels)
                     if by_trace or level.rate_rps is not None or level.requests is not None)


@dataclass
class ArmData:
    """One arm's derived request records (journaled steps only) and step summaries; ``spans``: each step's
    journaled ``(start_ns, end_ns)`` (the steady-state window ends at the step's end; without a span the step starts
    at its first send and lasts its duration); ``planned``: the steps on a planned schedule (:func:`planned_steps`)."""

    name: str
    df: pd.DataFrame
    steps: list[StepSummary]
    spans: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    planned: frozenset[int] = frozenset()
    _samples: dict[int, StepSample] | None = field(default=None, repr=False)

    def samples(self, slo: SloSpec) -> dict[int, StepSample]:
        """Per-step steady-state samples (computed once; :func:`harness.decision.evidence.step_sample`)."""
        if self._samples is None:
            out: dict[int, StepSample] = {}
            for step in self.steps:
                part = self.df[self.df["step"] == step.index] if not self.df.empty else self.df
                start_ns, end_ns = self.spans.get(step.index, (None, None))
                out[step.index] = step_sample(part, step.duration_s, slo, start_ns=start_ns, end_ns=end_ns,
                                              planned=step.index in self.planned)
            self._samples = out
        return self._samples


def _window_values(rule: BudgetRule, wins: Sequence[WindowPoint]) -> list[WindowValue]:
    """The arm's windows at the rule's metric and percentile (analysis computes every budget percentile)."""
    out = []
    for i, w in enumerate(wins):
        at = w.quantile(rule.metric, rule.percentile)
        if at is None:
            raise LookupError(f"windows carry no p{rule.percentile:g} {rule.metric.upper()} (rule {rule.label}): "
                              "analyze them with that percentile (harness.analysis.analyze_arms window_percentiles)")
        out.append(WindowValue(index=i, step=w.step, start_s=w.start_s, end_s=w.end_s, requests=w.requests,
                               value_ms=at.value_ms, ci=at.ci))
    return out


def _judged_steps_decide(per_step: list[tuple[RuleResult, bool]]) -> list[RuleResult]:
    """Steps whose samples cannot resolve the rule's percentile are reported but do not decide once another step
    could judge it (low load levels are naturally small); with no step able to judge, the rule stays unresolved."""
    if not any(judged for _, judged in per_step):
        return [r for r, _ in per_step]
    return [r if judged else r.model_copy(update={"status": "not-applicable", "message": f"not judged: {r.message}"})
            for r, judged in per_step]


def _budget_contention(result: RuleResult, contended: Mapping[int, str], any_clean: bool) -> RuleResult:
    """A budget judged on the clean steps' windows names the host-contended steps it left out; with no clean step
    it is unresolved (host contention), never judged on the host's figures."""
    if not contended:
        return result
    if not any_clean:
        return result.model_copy(update={
            "status": "unresolved", "reason_code": REASON, "step": None,
            "message": f"host contention: no step is clean to judge it on ({contended_text(contended)}); rerun on a "
                       "quieter host"})
    return result.model_copy(update={"message": f"{result.message} ({contended_text(contended)})"})


def _applies(names: list[str] | None, arm: Arm) -> bool:
    return names is None or arm.name in names


def budget_results(scenario: Scenario, arm: Arm, wins: list[WindowPoint], steps: Sequence[StepSummary],
                   contended: Mapping[int, str] | None = None) -> tuple[list[RuleResult], list[WindowPoint]]:
    """Every budget rule for the arm, each judged at its own percentile, and its windows with breached / unresolved
    rules marked (keeping, besides p99, only the percentiles those rules read). Host-contended steps (``contended``;
    default: the arm's own) are left out of the judgement and named."""
    rules = scenario.rules
    results: list[RuleResult] = []
    breached: dict[int, list[str]] = {}
    unresolved: dict[int, list[str]] = {}
    read: set[str] = set()
    contended = contended if contended is not None else contended_pairs(steps, arm.name)
    clean = clean_steps(steps, contended)
    for rule in rules.budgets:
        if not _applies(rule.arms, arm):
            continue
        budget = rule.budget_ms or scenario.slo.budget_ms(rule.metric)
        if budget is None:
            results.append(RuleResult(rule=rule.label, kind="budget", status="not-applicable", critical=rule.critical,
                                      dry_run=rule.dry_run,
                                      message=f"no budget: set budget_ms or slo.{rule.metric}_p99_ms"))
            continue
        if rule.percentile != 99.0:
            read.add(window_key(rule.metric, rule.percentile))
        values = [w for w in _window_values(rule, wins) if w.step not in contended]
        outcome = evaluate_budget(rule, budget, values, clean, rules.min_requests_per_window, rules.window_s)
        results.append(_budget_contention(outcome.result, contended, bool(clean)))
        for i in outcome.breached:
            breached.setdefault(i, []).append(rule.label)
        for i in outcome.unresolved:
            unresolved.setdefault(i, []).append(rule.label)
    marked = [w.model_copy(update={"breached": sorted(set(w.breached) | set(breached.get(i, []))),
                                   "unresolved": sorted(set(w.unresolved) | set(unresolved.get(i, []))),
                                   "percentiles": {k: v for k, v in w.percentiles.items() if k in read}})
              for i, w in enumerate(wins)]
    return results, marked


@dataclass(frozen=True)
class RegressionComparison:
    """One regression rule at one step: its result (after :func:`_judged_steps_decide`), the step's noise floor,
    the samples on each side and the samples that resolve the rule's percentile at its test level."""

    rule: RegressionRule
    step: StepSummary
    result: RuleResult
    floor: float
    n_mine: int
    n_base: int
    needed: int


def regression_comparisons(scenario: Scenario, arm: Arm, mine: ArmData, base: ArmData, *, looks: int = 1,
                           floors: Mapping[int, float] | None = None) -> list[RegressionComparison]:
    """Every regression rule, step by step against the baseline, with what each comparison rested on."""
    slo, n_levels = scenario.slo, len(scenario.steps.levels)
    out: list[RegressionComparison] = []
    base_samples = base.samples(slo)
    contended = contended_pairs(mine.steps, mine.name, (base.name, base.steps))
    for reg in scenario.rules.regression:
        if not _applies(reg.arms, arm):
            continue
        alpha_each = regression_alpha(reg.alpha, n_levels, looks)
        need = max(reg.min_samples, min_samples_to_resolve(reg.percentile / 100.0, 1.0 - 2.0 * alpha_each))
        per_step = []
        made: list[tuple[StepSummary, float, int, int]] = []
        for step in mine.steps:
            theirs = base_samples.get(step.index)
            if theirs is None:
                continue
            ours = mine.samples(slo)[step.index]
            floor = floor_at(floors, step.index)
            verdict = regression_step(reg, step.index, step.label, ours, theirs, alpha_each, floor)
            per_step.append((verdict.result, verdict.judged))
            made.append((step, floor, *_compared(verdict.result.interval, ours.metric(reg.metric),
                                                 theirs.metric(reg.metric))))
        results = _clean_steps_decide(per_step, [step.index for step, *_ in made], contended)
        for result, (step, floor, n_a, n_b) in zip(results, made, strict=True):
            out.append(RegressionComparison(reg, step, result, floor, n_a, n_b, need))
    return out


def _clean_steps_decide(per_step: list[tuple[RuleResult, bool]], steps: list[int], contended: Mapping[int, str]
                        ) -> list[RuleResult]:
    """:func:`_judged_steps_decide` over the steps that are not host-contended, then the contended ones set aside
    (:func:`harness.decision.rules.load_host.set_aside`): they never decide."""
    clean = [i for i, step in enumerate(steps) if step not in contended]
    decided = dict(zip(clean, _judged_steps_decide([per_step[i] for i in clean]), strict=True))
    merged = [decided.get(i, result) for i, (result, _) in enumerate(per_step)]
    return set_aside(list(zip(merged, steps, strict=True)), contended)


def _finite(values: npt.NDArray[np.float64]) -> int:
    return int(np.count_nonzero(~np.isnan(values)))


def _compared(ci: RatioCI | None, mine: npt.NDArray[np.float64], theirs: npt.NDArray[np.float64]) -> tuple[int, int]:
    """The samples a comparison compared (the interval's, pairs when paired), else the steady-state samples."""
    if ci is not None and ci.n is not None and ci.n_versus is not None:
        return ci.n, ci.n_versus
    return _finite(mine), _finite(theirs)


def regression_results(scenario: Scenario, arm: Arm, mine: ArmData, base: ArmData, *, looks: int = 1,
                       floors: Mapping[int, float] | None = None) -> list[RuleResult]:
    """Every regression rule, step by step against the baseline."""
    return [c.result for c in regression_comparisons(scenario, arm, mine, base, looks=looks, floors=floors)]


@dataclass
class ArmEvaluation:
    """One arm's rule results, its windows with rules marked, the budget rules it breached, and the comparisons
    behind the results (for the effect table: :mod:`harness.decision.effects`)."""

    results: list[RuleResult]
    windows: list[WindowPoint]
    breached: set[str]
    regressions: list[RegressionComparison] = field(default_factory=list)
    keep: KeepEvaluation | None = None
    keep_versus: str | None = None


def evaluate_arm(scenario: Scenario, arm: Arm, index: int, mine: ArmData, base: ArmData, prev: ArmData | None,
                 wins: list[WindowPoint], *, looks: int = 1, floors: Mapping[int, float] | None = None
                 ) -> ArmEvaluation:
    """All rule results for the arm, with the comparisons they rest on."""
    sides = [(base.name, base.steps)] + ([(prev.name, prev.steps)] if prev is not None else []) if index > 0 else []
    results, marked = budget_results(scenario, arm, wins, mine.steps, contended_pairs(mine.steps, mine.name, *sides))
    out = ArmEvaluation(results, marked, {r.rule for r in results if r.status == "breach"})
    if index > 0:
        out.regressions = regression_comparisons(scenario, arm, mine, base, looks=looks, floors=floors)
        results += [c.result for c in out.regressions]
        if prev is not None:
            rules = scenario.rules
            contended = contended_pairs(mine.steps, mine.name, (prev.name, prev.steps))
            results.append(evaluate_errors(rules.max_error_rate, mine.steps, prev.steps, prev.name,
                                           contended=contended))
            if rules.earns_keep is not None:
                out.keep = judge_earns_keep(rules.earns_keep, mine.steps, mine.samples(scenario.slo),
                                            prev.samples(scenario.slo), prev.name,
                                            n_steps=len(scenario.steps.levels), looks=looks, floors=floors,
                                            contended=contended)
                out.keep_versus = prev.name
                results.append(out.keep.result)
            if rules.require_own_tier_hits:
                results.append(own_tier_hits(arm, mine.steps, prev.steps, prev.name))
        results.append(evaluate_tier_health(scenario.rules.tier_health, arm.name, arm.tier, mine.steps))
    return out


def evaluate_arm_rules(scenario: Scenario, arm: Arm, index: int, mine: ArmData, base: ArmData, prev: ArmData | None,
                       wins: list[WindowPoint], *, looks: int = 1, floors: Mapping[int, float] | None = None
                       ) -> tuple[list[RuleResult], list[WindowPoint], set[str]]:
    """All rule results for the arm, its windows with rules marked, and the budget rules it breached."""
    ev = evaluate_arm(scenario, arm, index, mine, base, prev, wins, looks=looks, floors=floors)
    return ev.results, ev.windows, ev.breached
