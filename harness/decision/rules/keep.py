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

from harness.config.rules import EarnsKeepRule
from harness.decision.evidence import StepSample, describe, improvement
from harness.schema.intervals import RatioCI
from harness.schema.summary import RuleResult, StepSummary
from harness.stats.error_rates import keep_alpha

RULE = "earns-its-keep"


def evaluate_earns_keep(rule: EarnsKeepRule, steps: Sequence[StepSummary], mine: Mapping[int, StepSample],
                        theirs: Mapping[int, StepSample], other: str, *, n_steps: int, looks: int = 1,
                        floors: Mapping[int, float] | None = None) -> RuleResult:
    """The rule over every step both arms measured (``mine``/``theirs``: samples by step index)."""
    alpha_each = keep_alpha(rule.alpha, n_steps, len(rule.measures), looks)
    confidence = 1.0 - 2.0 * alpha_each
    def need_at(step: int) -> float:
        if not floors:
            return rule.min_improvement
        return rule.min_improvement * floors.get(step, max(floors.values()))

    judged: list[tuple[str, RatioCI, float]] = []
    skipped: list[str] = []
    for step in steps:
        a, b = mine.get(step.index), theirs.get(step.index)
        if a is None or b is None or a.n < rule.min_samples or b.n < rule.min_samples:
            continue
        for measure in rule.measures:
            ci = improvement(measure, a, b, confidence)
            text = describe(measure, step.index, step.label, other, ci)
            if ci.resolved and ci.lo is not None and ci.hi is not None:
                judged.append((text, ci, need_at(step.index)))
            else:
                skipped.append(f"{text}{': ' + ci.note if ci.note else ''}")
    family = (f"one-sided {alpha_each:.3g} per comparison = alpha {rule.alpha:g} over {n_steps} step(s) x "
              f"{len(rule.measures)} measure(s)" + (f" x {looks} looks" if looks > 1 else "") + " (Holm/Bonferroni)")
    floor_text = " x that step's noise floor (A/A)" if floors else ""
    needs = f"needs the lower bound >= {rule.min_improvement:.2f}{floor_text}"
    wins = [(t, ci, need) for t, ci, need in judged if ci.lo is not None and ci.lo >= need]
    if wins:
        text, ci, need = max(wins, key=lambda item: (item[1].lo or 0.0) / item[2])
        return RuleResult(rule=RULE, kind="earns_keep", status="pass", interval=ci, threshold=need,
                          message=f"earns its keep: {text}; {needs} ({need:.2f}x); {family}")
    if not judged and not skipped:
        return RuleResult(rule=RULE, kind="earns_keep", status="unresolved",
                          message=f"no step had {rule.min_samples}+ requests in both this arm and {other}")
    if judged and not skipped and all(ci.hi is not None and ci.hi < need for _, ci, need in judged):
        text, ci, need = max(judged, key=lambda item: (item[1].ratio or 0.0) / item[2])
        return RuleResult(rule=RULE, kind="earns_keep", status="breach", interval=ci, threshold=need,
                          message=f"does not earn its keep: every improvement's interval lies below what it needs; "
                          f"best {text} (needs {need:.2f}x); {family}")
    if judged:
        text, ci, need = max(judged, key=lambda item: (item[1].lo or 0.0) / item[2])
        return RuleResult(rule=RULE, kind="earns_keep", status="unresolved", interval=ci, threshold=need,
                          message=f"no improvement is shown: {text}; {needs} ({need:.2f}x); {family}"
                          + (f"; {len(skipped)} comparison(s) unresolved" if skipped else ""))
    return RuleResult(rule=RULE, kind="earns_keep", status="unresolved",
                      message=f"no improvement is shown: {skipped[0]}; {needs}; {family}")
