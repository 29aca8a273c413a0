"""The break-even load: where along the rising steps a tier starts to pay, from its effect rows
(:mod:`harness.decision.effects`).

A step *improves* when one of its rows shows an improvement (earns its keep's lower bound reaches its limit), and
*hurts* when one shows harm (a regression rule's breach) or a measure shown worse than the arm without the tier
beyond the noise floor. The lowest improving step and the highest hurting step, in load order, give the answer:

* ``helps-everywhere``: every step compared improves, none hurts;
* ``helps-from``: improves from some step up, never hurts;
* ``crossover``: hurts below, improves above, and the break-even lies between the two; where they meet at a run of
  consecutive steps that show both (a trade-off between measures), the break-even is that run;
* ``harm-only``, ``never-shown`` (neither);
* ``mixed``: no single crossing (improvement and harm interleave, or harm lies above improvement).

Each answer names the rows that state it, with their intervals. A step counted neither way says why
(``not_counted``, :func:`not_counted`): an effect inside the step's noise floor (with the floor, the comparison and
the end its interval had to pass), an interval that straddles its limit, neither shown, not judged, host-contended.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from harness.decision.effects import num, ratio_text
from harness.schema.summary import BreakEven, EffectRow, NotCountedStep, StepSummary

IMPROVED = ("improvement shown",)
HURT = ("harm shown", "worse shown")
BreakEvenStatus = Literal["helps-everywhere", "crossover", "helps-from", "harm-only", "never-shown", "mixed"]
Side = Literal["improvement", "worse", "harm"]


def absorbed(row: EffectRow) -> tuple[Side, float, float] | None:
    """What ``row`` would have shown without its step's noise floor (``row.floor`` > 1) and does not show with it:
    ``(side, needed, closeness)``, ``needed`` the end its interval had to pass and ``closeness`` how near it came
    (1 = at it); None when the floor changed nothing."""
    ci = row.interval
    floor = row.floor
    if floor <= 1.0 or not ci.resolved or ci.lo is None or ci.hi is None or row.limit is None or row.limit <= 0:
        return None
    if row.test == "improvement" and row.outcome not in ("improvement shown", "worse shown"):
        if ci.lo >= row.limit / floor:  # clears min_improvement, not min_improvement x floor
            return "improvement", row.limit, ci.lo / row.limit
        if 0 < ci.hi < 1.0:  # below 1, not below 1 / floor
            return "worse", 1.0 / floor, 1.0 / (floor * ci.hi)
    if row.test == "harm" and row.outcome != "harm shown" and ci.lo > row.limit / floor:  # above max_ratio only
        return "harm", row.limit, ci.lo / row.limit
    return None


def not_counted(step: int, label: str, rows: Sequence[EffectRow]) -> NotCountedStep:
    """Why a step whose ``rows`` show neither an improvement nor harm is not counted (see the module docs)."""
    floor = max((r.floor for r in rows), default=1.0)
    if rows and all(r.outcome == "host-contended" for r in rows):
        return NotCountedStep(step=step, label=label, reason="host-contended", floor=floor)
    rows = [r for r in rows if r.outcome != "host-contended"]
    inside = [(r, found) for r in rows if (found := absorbed(r)) is not None]
    if inside:
        row, (side, needed, _closeness) = max(inside, key=lambda pair: pair[1][2])
        return NotCountedStep(step=step, label=label, reason="inside-noise-floor", floor=row.floor, side=side,
                              needed=round(needed, 4), row=row)
    open_rows = [r for r in rows if r.outcome == "not settled"]
    if open_rows:
        return NotCountedStep(step=step, label=label, reason="not-settled", floor=floor, row=open_rows[0])
    unjudged = [r for r in rows if r.outcome == "not judged"]
    if unjudged:
        return NotCountedStep(step=step, label=label, reason="not-judged", floor=floor, row=unjudged[0])
    return NotCountedStep(step=step, label=label, reason="neither-shown", floor=floor)


def _strength(row: EffectRow) -> float:
    """How far a row's interval lies beyond the limit it cleared (for choosing the row that states a step)."""
    ci = row.interval
    if row.outcome == "improvement shown" and ci.lo is not None and row.limit:
        return ci.lo / row.limit
    if row.outcome == "harm shown" and ci.lo is not None and row.limit:
        return 1.0 + ci.lo / row.limit
    if row.outcome == "worse shown" and ci.hi is not None and ci.hi > 0:
        return 1.0 / (ci.hi * row.floor)
    return 0.0


def row_text(row: EffectRow) -> str:
    """``output_tokens_per_s 1.51x [1.43, 1.60] vs baseline at c32 (limit 1.05x)``."""
    if row.outcome == "improvement shown":
        limit = f"needs >= {num(row.limit)}x"
    elif row.outcome == "harm shown":
        limit = f"harm above {num(row.limit)}x"
    elif row.outcome == "worse shown":
        limit = f"worse: below {num(1.0 / row.floor)}x"
    else:
        limit = f"limit {num(row.limit)}x"
    return f"{row.measure} {ratio_text(row.interval)} vs {row.versus} at {row.label} ({limit})"


def break_even(rows: Sequence[EffectRow], steps: Sequence[StepSummary]) -> BreakEven | None:
    """Where the tier starts to pay along the steps (None when there are no rows at all)."""
    if not rows:
        return None
    order = {s.index: i for i, s in enumerate(sorted(steps, key=_load_key))}
    labels = {s.index: s.label for s in steps}
    # a host-contended step (harness.decision.rules.load_host) compared nothing the tier can be credited with
    aside = sorted({r.step for r in rows} - {r.step for r in rows if r.outcome != "host-contended"},
                   key=lambda i: order.get(i, i))
    where = ", ".join(labels.get(i, str(i)) for i in aside)
    note = f"; {where} host-contended, not compared" if aside else ""
    all_rows = list(rows)
    rows = [r for r in rows if r.outcome != "host-contended"]
    if not rows:
        return BreakEven(status="never-shown", text=f"never shown: every step tested was host-contended ({where})",
                         not_counted=[not_counted(i, labels.get(i, str(i)), [r for r in all_rows if r.step == i])
                                      for i in aside])
    compared = sorted({r.step for r in rows}, key=lambda i: order.get(i, i))
    improved = [i for i in compared if any(r.step == i and r.outcome in IMPROVED for r in rows)]
    hurt = [i for i in compared if any(r.step == i and r.outcome in HURT for r in rows)]
    names = [labels.get(i, str(i)) for i in compared]

    def best(step: int, outcomes: tuple[str, ...]) -> EffectRow:
        cands = [r for r in rows if r.step == step and r.outcome in outcomes]
        return max(cands, key=_strength)

    lo_imp = best(improved[0], IMPROVED) if improved else None
    hi_harm = best(hurt[-1], HURT) if hurt else None
    span = f"{names[0]}-{names[-1]}" if len(names) > 1 else names[0]
    imp_labels = [labels.get(i, str(i)) for i in improved]
    harm_labels = [labels.get(i, str(i)) for i in hurt]

    uncounted = sorted({r.step for r in all_rows} - set(improved) - set(hurt), key=lambda i: order.get(i, i))
    why = [not_counted(i, labels.get(i, str(i)), [r for r in all_rows if r.step == i]) for i in uncounted]

    def made(status: BreakEvenStatus, text: str) -> BreakEven:
        return BreakEven(status=status, text=text + note, improvement_from=lo_imp, harm_up_to=hi_harm,
                         improvement_steps=imp_labels, harm_steps=harm_labels, steps=names, not_counted=why)

    if not improved and not hurt:
        return made("never-shown", f"never shown: neither an improvement nor harm is shown at any step tested "
                    f"({span})")
    if improved and not hurt:
        assert lo_imp is not None
        if len(improved) == len(compared):
            return made("helps-everywhere", f"helps at every step tested ({span}); at the lowest, {row_text(lo_imp)}")
        missing = [n for i, n in zip(compared, names, strict=True) if i not in improved]
        return made("helps-from", f"improvement shown from {lo_imp.label} ({row_text(lo_imp)}); not shown at "
                    f"{', '.join(missing)}, no harm shown")
    if hurt and not improved:
        assert hi_harm is not None
        where = "at every step tested" if len(hurt) == len(compared) else f"at {', '.join(harm_labels)}"
        return made("harm-only", f"improvement never shown; {_hurt_word(hi_harm)} {where} (at the highest, "
                    f"{row_text(hi_harm)})")
    assert lo_imp is not None and hi_harm is not None
    if order.get(hurt[-1], 0) < order.get(improved[0], 0):
        between = [n for i, n in zip(compared, names, strict=True)
                   if order.get(hurt[-1], 0) < order.get(i, 0) < order.get(improved[0], 0)]
        gap = f"; {', '.join(between)} settled neither" if between else ""
        return made("crossover", f"crosses over between {hi_harm.label} and {lo_imp.label}: {_hurt_word(hi_harm)} "
                    f"up to {hi_harm.label} ({row_text(hi_harm)}), improvement from {lo_imp.label} "
                    f"({row_text(lo_imp)}){gap}")
    band = [labels.get(i, str(i)) for i in _trade_off_band(compared, improved, hurt)]
    if band:
        where = band[0] if len(band) == 1 else f"{band[0]}-{band[-1]}"
        return made("crossover", f"crosses over at {where}: {_hurt_word(hi_harm)} up to {hi_harm.label} "
                    f"({row_text(hi_harm)}), improvement from {lo_imp.label} ({row_text(lo_imp)}); at "
                    f"{', '.join(band)} both are shown (a trade-off between the measures)")
    return made("mixed", f"no single break-even: improvement shown at {', '.join(imp_labels)}, harm or worse at "
                f"{', '.join(harm_labels)} (lowest improvement: {row_text(lo_imp)}; highest harm: "
                f"{row_text(hi_harm)})")


def _trade_off_band(compared: list[int], improved: list[int], hurt: list[int]) -> list[int]:
    """The steps where harm and improvement meet, when the answer is still one crossing: a run of
    consecutive steps that show both, only harm below it and only improvement above it (at least one of the two
    beside it); [] otherwise."""
    both = [i for i in compared if i in improved and i in hurt]
    if not both:
        return []
    pos = {i: k for k, i in enumerate(compared)}
    first, last = pos[both[0]], pos[both[-1]]
    if last - first + 1 != len(both):  # the band is interrupted by a step that does not show both
        return []
    only_hurt = [pos[i] for i in hurt if i not in both]
    only_improved = [pos[i] for i in improved if i not in both]
    if not only_hurt and not only_improved:
        return []
    if any(p > first for p in only_hurt) or any(p < last for p in only_improved):
        return []
    return both


def _hurt_word(row: EffectRow) -> str:
    return "harm shown" if row.outcome == "harm shown" else f"shown worse than {row.versus}"


def _load_key(step: StepSummary) -> tuple[float, int]:
    load = step.concurrency if step.concurrency is not None else step.rate_rps
    return (float(load) if load is not None else float(step.index), step.index)
