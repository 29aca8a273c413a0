"""The effect table and the break-even load as every report shows them (summary.md, report.html, junit.xml).

Rows come from ``ArmSummary.effects`` (the deciding comparisons the rules made, :mod:`harness.decision.effects`);
nothing is recomputed here. Each row is shown with its interval (the rule's own confidence, said when it is not the
run's usual one), the limit it was held against, what it decided and its source.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.report.fmt_ci import ratio_view
from harness.schema.summary import ArmSummary, EffectRow, NotCountedStep, Summary

_MEASURES = {"output_tokens_per_s": "output tokens/s", "goodput": "goodput (share within SLO)"}
LEGEND = ("Improvement rows (earns its keep): this arm over the arm without its newest tier, > 1 = better; the "
          "improvement is shown when the interval's lower end reaches the limit (min_improvement x the step's noise "
          "floor). Harm rows (regression): this arm's percentile over the baseline's, > 1 = worse; harm is shown "
          "when the lower end exceeds max_ratio x floor, within the limit when the upper end is at most max_ratio "
          "/ floor. Each interval is the rule's own (one-sided test, family of steps, measures and looks "
          "controlled), computed from that step's request records (requests.parquet).")


def measure_name(row: EffectRow) -> str:
    """``output tokens/s``, ``p95 TTFT`` (from ``ttft_p95``), ``p90 TTFT`` (regression rows already read so)."""
    if row.measure in _MEASURES:
        return _MEASURES[row.measure]
    metric, sep, pct = row.measure.partition("_p")
    if sep and pct:
        return f"p{pct} {metric.upper()}"
    return row.measure


def limit_text(row: EffectRow) -> str:
    """``≥ 1.07 (min_improvement 1.05 x noise floor 1.018)`` or ``harm > 1.12, within ≤ 1.08 (max_ratio 1.10 ...)``."""
    if row.limit is None:
        return row.limit_text or "none"
    how = f" ({row.limit_text})" if row.limit_text else ""
    if row.test == "improvement":
        return f"≥ {row.limit:.2f}{how}"
    within = row.pass_limit if row.pass_limit is not None else row.limit
    return f"harm > {row.limit:.2f}, within ≤ {within:.2f}{how}"


@dataclass(frozen=True)
class EffectView:
    """One effect row as text."""

    arm: str
    step: str
    measure: str
    test: str
    versus: str
    ratio: str
    resolved: bool
    limit: str
    outcome: str
    deciding: bool
    n: str
    source: str
    settle: str

    @property
    def outcome_slug(self) -> str:
        return self.outcome.replace(" ", "-")


def effect_views(arm: ArmSummary, usual_confidence: float = 0.95) -> list[EffectView]:
    """The arm's effect rows as text, in table order (improvements by step, then harm by step)."""
    out = []
    for row in arm.effects:
        rv = ratio_view(row.interval, usual_confidence)
        n = f"{row.n:,} / {row.n_versus:,}" if row.n is not None and row.n_versus is not None else "n/a"
        out.append(EffectView(arm=arm.name, step=row.label or str(row.step), measure=measure_name(row),
                              test=row.test, versus=row.versus, ratio=rv.text, resolved=rv.resolved,
                              limit=limit_text(row), outcome=row.outcome, deciding=row.deciding, n=n,
                              source=row.source, settle=row.settle or ""))
    return out


def effect_arms(summary: Summary) -> list[ArmSummary]:
    """The arms with an effect table or a break-even (tier arms that were compared)."""
    return [a for a in summary.arms if a.effects or a.break_even is not None]


_SIDE_NEEDS = {"improvement": "an improvement needs the lower end ≥ {:.2f}x",
               "worse": "worse needs the upper end below {:.2f}x",
               "harm": "harm needs the lower end above {:.2f}x"}
_NOT_COUNTED = {"not-settled": "not settled (an interval straddles its limit)",
                "neither-shown": "neither an improvement nor harm shown",
                "not-judged": "not judged (too few requests)"}


def not_counted_words(step: NotCountedStep, usual_confidence: float = 0.95) -> str:
    """``c16 inside its noise floor 1.06x (output tokens/s 0.91x [0.87–0.96] vs cpu-16g; worse needs the upper end
    below 0.94x)``, ``c8 not settled (...)``; '' for a host-contended step (the break-even's text says so)."""
    name = step.label or f"step {step.step}"
    if step.reason == "inside-noise-floor" and step.row is not None and step.side is not None:
        needs = _SIDE_NEEDS[step.side].format(step.needed) if step.needed is not None else ""
        row = step.row
        return (f"{name} inside its noise floor {step.floor:.2f}x ({measure_name(row)} "
                f"{ratio_view(row.interval, usual_confidence).text} vs {row.versus}; {needs})")
    return f"{name} {_NOT_COUNTED[step.reason]}" if step.reason in _NOT_COUNTED else ""


def _grouped(steps: list[NotCountedStep]) -> list[str]:
    """Each step inside its noise floor on its own (its floor and row differ); the other reasons one phrase each,
    naming their steps (``c8, c16 not settled (...)``); host-contended steps left to the break-even's text."""
    out = [not_counted_words(s) for s in steps if s.reason == "inside-noise-floor"]
    for reason, words in _NOT_COUNTED.items():
        names = [s.label or f"step {s.step}" for s in steps if s.reason == reason]
        if names:
            out.append(f"{', '.join(names)} {words}")
    return [w for w in out if w]


def break_even_words(arm: ArmSummary) -> str:
    """The break-even's text, then the steps it counted neither way and why (``BreakEven.not_counted``); ''
    when none."""
    if arm.break_even is None or not arm.break_even.text:
        return ""
    why = _grouped(arm.break_even.not_counted)
    return arm.break_even.text + (f"; not counted: {'; '.join(why)}" if why else "")


def break_even_line(arm: ArmSummary) -> str:
    """One line: ``break-even: helps at every step tested (c8-c32); ...`` ('' when none)."""
    words = break_even_words(arm)
    return f"break-even: {words}" if words else ""


def effect_lines(arm: ArmSummary, usual_confidence: float = 0.95) -> list[str]:
    """The table as plain lines (JUnit system-out, terminals)."""
    lines = []
    for v in effect_views(arm, usual_confidence):
        mark = " [decided]" if v.deciding else ""
        settle = f"; to settle: {v.settle}" if v.settle else ""
        lines.append(f"{v.step} {v.measure} vs {v.versus}: {v.ratio}; limit {v.limit}; {v.outcome}{mark}; "
                     f"n={v.n}{settle}")
    return lines
