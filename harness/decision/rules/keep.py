"""'Earns its keep': the newest tier must improve some measure by ``min_improvement`` against the arm without it,
shown by an interval, with the family of steps x measures controlled.

For every step with ``min_samples`` requests on both sides and every measure, the improvement (> 1 = better) gets a
one-sided test at ``alpha / (steps x measures x looks)``, read off the two-sided interval of that level. The tier
earns its keep (**pass**) when some lower bound clears ``min_improvement`` times the noise floor (Holm's step-down
procedure rejects its first hypothesis exactly when Bonferroni does, and "at least one improvement" needs no more);
it does **not** (**breach** — a hold, never a veto) when every judged comparison's upper bound falls short; otherwise
the evidence is **unresolved** (also a hold). The best point estimate never decides on its own. Every message names
the bound as a number (:class:`~harness.decision.bounds.KeepBounds`: ``lower end >= 1.113 (1.05 x floor 1.060)``).

A comparison at a host-contended step (:mod:`harness.decision.rules.load_host`: either arm over its host-contention
budget) is listed and never decides; with no clean comparison the rule is unresolved with reason ``host-contended``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from harness.config.rules import EarnsKeepRule
from harness.decision.bounds import KeepBounds, floor_at
from harness.decision.evidence import StepSample, describe, improvement
from harness.decision.rules.load_host import REASON
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
    contended: str | None = None  # why the step is host-contended (it then never decides)

    @property
    def resolved(self) -> bool:
        return self.ci.resolved and self.ci.lo is not None and self.ci.hi is not None

    @property
    def bounds(self) -> KeepBounds:
        return KeepBounds(self.need / self.floor, self.floor)


@dataclass(frozen=True)
class KeepEvaluation:
    """The rule's result and every comparison it made (the effect table's improvement rows)."""

    result: RuleResult
    comparisons: list[KeepComparison]
    winner: KeepComparison | None  # the comparison that earned the pass (None unless the rule passed)
    alpha_each: float


def keep_comparisons(rule: EarnsKeepRule, steps: Sequence[StepSummary], mine: Mapping[int, StepSample],
                     theirs: Mapping[int, StepSample], other: str, *, alpha_each: float,
                     floors: Mapping[int, float] | None = None,
                     contended: Mapping[int, str] | None = None) -> list[KeepComparison]:
    """Every comparison the rule makes: each step with ``min_samples`` requests on both sides x each measure
    (``contended``: step index -> why that step is host-contended)."""
    confidence = 1.0 - 2.0 * alpha_each
    out: list[KeepComparison] = []
    for step in steps:
        a, b = mine.get(step.index), theirs.get(step.index)
        if a is None or b is None or a.n < rule.min_samples or b.n < rule.min_samples:
            continue
        floor = floor_at(floors, step.index)
        for measure in rule.measures:
            ci = improvement(measure, a, b, confidence)
            out.append(KeepComparison(step=step, measure=measure, ci=ci,
                                      need=KeepBounds(rule.min_improvement, floor).need, floor=floor,
                                      n_mine=a.n if ci.n is None else ci.n,  # the n compared (steady state)
                                      n_theirs=b.n if ci.n_versus is None else ci.n_versus,
                                      text=describe(measure, step.index, step.label, other, ci),
                                      contended=(contended or {}).get(step.index)))
    return out


def evaluate_earns_keep(rule: EarnsKeepRule, steps: Sequence[StepSummary], mine: Mapping[int, StepSample],
                        theirs: Mapping[int, StepSample], other: str, *, n_steps: int, looks: int = 1,
                        floors: Mapping[int, float] | None = None,
                        contended: Mapping[int, str] | None = None) -> RuleResult:
    """The rule over every step both arms measured (``mine``/``theirs``: samples by step index)."""
    return judge_earns_keep(rule, steps, mine, theirs, other, n_steps=n_steps, looks=looks, floors=floors,
                            contended=contended).result


def judge_earns_keep(rule: EarnsKeepRule, steps: Sequence[StepSummary], mine: Mapping[int, StepSample],
                     theirs: Mapping[int, StepSample], other: str, *, n_steps: int, looks: int = 1,
                     floors: Mapping[int, float] | None = None,
                     contended: Mapping[int, str] | None = None) -> KeepEvaluation:
    """:func:`evaluate_earns_keep` with the comparisons behind it (``contended``: step index -> why that step is
    host-contended; its comparisons are listed and never decide)."""
    alpha_each = keep_alpha(rule.alpha, n_steps, len(rule.measures), looks)
    comparisons = keep_comparisons(rule, steps, mine, theirs, other, alpha_each=alpha_each, floors=floors,
                                   contended=contended)
    clean = [c for c in comparisons if c.contended is None]
    judged = [c for c in clean if c.resolved]
    skipped = [f"{c.text}{': ' + c.ci.note if c.ci.note else ''}" for c in clean if not c.resolved]
    set_aside = sorted({c.step.index: c.contended for c in comparisons if c.contended is not None}.items())
    aside = "; ".join(f"host-contended, not deciding: {why}" for _, why in set_aside)
    family = (f"one-sided {alpha_each:.3g} per comparison = alpha {rule.alpha:g} over {n_steps} step(s) x "
              f"{len(rule.measures)} measure(s)" + (f" x {looks} looks" if looks > 1 else "") + " (Holm/Bonferroni)"
              + (f"; {aside}" if aside else ""))

    def needs(c: KeepComparison) -> str:
        return f"needs the lower end >= {c.need:.3f}" + (f" ({rule.min_improvement:.2f} x that step's noise floor "
                                                         f"{c.floor:.3f})" if c.floor > 1.0 else "")

    def done(result: RuleResult, winner: KeepComparison | None = None) -> KeepEvaluation:
        return KeepEvaluation(result=result, comparisons=comparisons, winner=winner, alpha_each=alpha_each)

    def result(status: str, message: str, best: KeepComparison | None = None, reason: str | None = None
               ) -> RuleResult:
        bound = round(best.need, 4) if best is not None else None
        bounds = {} if best is None else {"interval": best.ci, "threshold": best.need, "pass_bound": bound,
                                          "breach_bound": bound, "floor": best.floor}
        return RuleResult.model_validate({"rule": RULE, "kind": "earns_keep", "status": status, "message": message,
                                          "reason_code": reason, **bounds})

    wins = [c for c in judged if c.ci.lo is not None and c.ci.lo >= c.need]
    if wins:
        best = max(wins, key=lambda c: (c.ci.lo or 0.0) / c.need)
        return done(result("pass", f"earns its keep: {best.text}; {needs(best)}; {family}", best), best)
    if comparisons and not clean:
        why = "; ".join(text for _, text in set_aside)
        return done(result("unresolved", f"host contention: no step is clean to judge it on ({why}); what it "
                           "measured cannot be charged to the engine — rerun on a quieter host", reason=REASON))
    if not judged and not skipped:
        return done(result("unresolved", f"no step had {rule.min_samples}+ requests in both this arm and {other}"))
    if judged and not skipped and all(c.ci.hi is not None and c.ci.hi < c.need for c in judged):
        best = max(judged, key=lambda c: (c.ci.ratio or 0.0) / c.need)
        return done(result("breach", f"does not earn its keep: every improvement's interval lies below what it "
                           f"needs (its upper end < the bound); best {best.text} ({needs(best)}); {family}", best))
    if judged:
        best = max(judged, key=lambda c: (c.ci.lo or 0.0) / c.need)
        return done(result("unresolved", f"no improvement is shown: {best.text}; {needs(best)}; {family}"
                           + (f"; {len(skipped)} comparison(s) unresolved" if skipped else ""), best))
    first = next(c for c in clean if not c.resolved)
    return done(result("unresolved", f"no improvement is shown: {skipped[0]}; {needs(first)}; {family}"))
