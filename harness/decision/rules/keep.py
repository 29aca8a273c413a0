"""'Earns its keep': the newest tier must improve some measure by ``min_improvement`` against the arm without it,
shown by an interval, with the family of steps x measures controlled.

For every step with ``min_samples`` requests on both sides and every measure, the improvement (> 1 = better) gets a
one-sided test at ``alpha / (steps x measures x looks)``, read off the two-sided interval of that level. The tier
earns its keep (**pass**) when some lower bound clears ``min_improvement`` times the noise floor (Holm's step-down
procedure rejects its first hypothesis exactly when Bonferroni does, and "at least one improvement" needs no more);
it does **not** (**breach** — a hold, never a veto) when every judged comparison's upper bound falls short; otherwise
the evidence is **unresolved** (also a hold). The best point estimate never decides on its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.config.rules import EarnsKeepRule
from harness.decision.evidence import StepSample, describe, improvement
from harness.schema.intervals import RatioCI
from harness.schema.summary import RuleResult, StepSummary
from harness.stats.error_rates import keep_alpha

RULE = "earns-its-keep"


@dataclass(frozen=True)
class KeepComparison:
    """One (step, measure) comparison of the rule: the improvement's interval at the rule's test level and what
    it needs (``min_improvement`` x the step's noise floor). ``resolved``: the interval has both ends."""

    step: StepSummary
    measure: str
    ci: RatioCI
    need: float
    floor: float
    n_mine: int
    n_theirs: int
    text: str

    @property
    def resolved(self) -> bool:
        return self.ci.resolved and self.ci.lo is not None and self.ci.hi is not None


@dataclass(frozen=True)
class KeepEvaluation:
    """The rule's result and every comparison it made (the effect table's improvement rows)."""

    result: RuleResult
    comparisons: list[KeepComparison]
    winner: KeepComparison | None  # the comparison that earned the pass (None unless the rule passed)
    alpha_each: float


def keep_comparisons(rule: EarnsKeepRule, steps: Sequence[StepSummary], mine: Mapping[int, StepSample],
                     theirs: Mapping[int, StepSample], other: str, *, alpha_each: float,
                     floors: Mapping[int, float] | None = None) -> list[KeepComparison]:
    """Every comparison the rule makes: each step with ``min_samples`` requests on both sides x each measure."""
    confidence = 1.0 - 2.0 * alpha_each
    out: list[KeepComparison] = []
    for step in steps:
        a, b = mine.get(step.index), theirs.get(step.index)
        if a is None or b is None or a.n < rule.min_samples or b.n < rule.min_samples:
            continue
        floor = 1.0 if not floors else floors.get(step.index, max(floors.values()))
        for measure in rule.measures:
            ci = improvement(measure, a, b, confidence)
            out.append(KeepComparison(step=step, measure=measure, ci=ci, need=rule.min_improvement * floor,
                                      floor=floor, n_mine=a.n, n_theirs=b.n,
                                      text=describe(measure, step.index, step.label, other, ci)))
    return out


def evaluate_earns_keep(rule: EarnsKeepRule, steps: Sequence[StepSummary], mine: Mapping[int, StepSample],
                        theirs: Mapping[int, StepSample], other: str, *, n_steps: int, looks: int = 1,
                        floors: Mapping[int, float] | None = None) -> RuleResult:
    """The rule over every step both arms measured (``mine``/``theirs``: samples by step index)."""
    return judge_earns_keep(rule, steps, mine, theirs, other, n_steps=n_steps, looks=looks, floors=floors).result


def judge_earns_keep(rule: EarnsKeepRule, steps: Sequence[StepSummary], mine: Mapping[int, StepSample],
                     theirs: Mapping[int, StepSample], other: str, *, n_steps: int, looks: int = 1,
                     floors: Mapping[int, float] | None = None) -> KeepEvaluation:
    """:func:`evaluate_earns_keep` with the comparisons behind it."""
    alpha_each = keep_alpha(rule.alpha, n_steps, len(rule.measures), looks)
    comparisons = keep_comparisons(rule, steps, mine, theirs, other, alpha_each=alpha_each, floors=floors)
    judged = [c for c in comparisons if c.resolved]
    skipped = [f"{c.text}{': ' + c.ci.note if c.ci.note else ''}" for c in comparisons if not c.resolved]
    family = (f"one-sided {alpha_each:.3g} per comparison = alpha {rule.alpha:g} over {n_steps} step(s) x "
              f"{len(rule.measures)} measure(s)" + (f" x {looks} looks" if looks > 1 else "") + " (Holm/Bonferroni)")
    floor_text = " x that step's noise floor (A/A)" if floors else ""
    needs = f"needs the lower bound >= {rule.min_improvement:.2f}{floor_text}"

    def done(result: RuleResult, winner: KeepComparison | None = None) -> KeepEvaluation:
        return KeepEvaluation(result=result, comparisons=comparisons, winner=winner, alpha_each=alpha_each)

    wins = [c for c in judged if c.ci.lo is not None and c.ci.lo >= c.need]
    if wins:
        best = max(wins, key=lambda c: (c.ci.lo or 0.0) / c.need)
        return done(RuleResult(rule=RULE, kind="earns_keep", status="pass", interval=best.ci, threshold=best.need,
                               message=f"earns its keep: {best.text}; {needs} ({best.need:.2f}x); {family}"), best)
    if not judged and not skipped:
        return done(RuleResult(rule=RULE, kind="earns_keep", status="unresolved",
                               message=f"no step had {rule.min_samples}+ requests in both this arm and {other}"))
    if judged and not skipped and all(c.ci.hi is not None and c.ci.hi < c.need for c in judged):
        best = max(judged, key=lambda c: (c.ci.ratio or 0.0) / c.need)
        return done(RuleResult(rule=RULE, kind="earns_keep", status="breach", interval=best.ci, threshold=best.need,
                               message=f"does not earn its keep: every improvement's interval lies below what it "
                               f"needs; best {best.text} (needs {best.need:.2f}x); {family}"))
    if judged:
        best = max(judged, key=lambda c: (c.ci.lo or 0.0) / c.need)
        return done(RuleResult(rule=RULE, kind="earns_keep", status="unresolved", interval=best.ci,
                               threshold=best.need,
                               message=f"no improvement is shown: {best.text}; {needs} ({best.need:.2f}x); {family}"
                               + (f"; {len(skipped)} comparison(s) unresolved" if skipped else "")))
    return done(RuleResult(rule=RULE, kind="earns_keep", status="unresolved",
                           message=f"no improvement is shown: {skipped[0]}; {needs}; {family}"))
