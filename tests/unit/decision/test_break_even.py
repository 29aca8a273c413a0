"""The break-even load from per-step effect rows: helps everywhere, never shown, harm at low load then help at high
load (a crossover, with the steps between that settled neither), non-monotone answers, and the rows each names."""

from __future__ import annotations

from harness.decision.break_even import break_even
from harness.schema.intervals import RatioCI
from harness.schema.summary import EffectRow, StepSummary

LOADS = (2, 8, 16, 32)
STEPS = [StepSummary(index=i, label=f"c{c}", concurrency=c) for i, c in enumerate(LOADS)]


def row(step: int, outcome: str, test: str = "improvement", ratio: float = 1.3, lo: float = 1.2,
        hi: float = 1.4) -> EffectRow:
    return EffectRow(rule="earns-its-keep" if test == "improvement" else "ttft-p90-vs-baseline",
                     test=test, measure="output_tokens_per_s" if test == "improvement" else "p90 TTFT",  # type: ignore[arg-type]
                     step=step, label=f"c{LOADS[step]}", concurrency=LOADS[step], versus="baseline",
                     interval=RatioCI(ratio=ratio, lo=lo, hi=hi, resolved=True, confidence=0.99),
                     limit=1.05 if test == "improvement" else 1.10, pass_limit=None if test == "improvement" else 1.10,
                     outcome=outcome)  # type: ignore[arg-type]


def harm(step: int, ratio: float = 1.5, lo: float = 1.3, hi: float = 1.7) -> EffectRow:
    return row(step, "harm shown", "harm", ratio, lo, hi)


def within(step: int) -> EffectRow:
    return row(step, "within limit", "harm", 0.9, 0.8, 1.0)


def test_helps_at_every_step_tested() -> None:
    be = break_even([row(i, "improvement shown", lo=1.1 + i / 10) for i in range(4)] + [within(i) for i in range(4)],
                    STEPS)
    assert be is not None and be.status == "helps-everywhere"
    assert be.improvement_from is not None and be.improvement_from.label == "c2" and be.harm_up_to is None
    assert be.improvement_steps == ["c2", "c8", "c16", "c32"] and be.harm_steps == []
    assert be.text.startswith("helps at every step tested (c2-c32); at the lowest, output_tokens_per_s 1.30x "
                              "[1.10, 1.40] vs baseline at c2")


def test_never_shown() -> None:
    be = break_even([row(i, "not settled", lo=0.95) for i in range(4)] + [within(i) for i in range(4)], STEPS)
    assert be is not None and be.status == "never-shown"
    assert be.improvement_from is None and be.harm_up_to is None
    assert be.text == "never shown: neither an improvement nor harm is shown at any step tested (c2-c32)"


def test_harm_at_low_load_then_help_at_high_load_is_a_crossover_between_the_right_steps() -> None:
    rows = [harm(0), row(0, "worse shown", ratio=0.9, lo=0.85, hi=0.95), row(1, "not settled", lo=0.97),
            within(1), row(2, "improvement shown", lo=1.08), within(2), row(3, "improvement shown", lo=1.3),
            within(3)]
    be = break_even(rows, STEPS)
    assert be is not None and be.status == "crossover"
    assert be.harm_up_to is not None and be.harm_up_to.label == "c2" and be.harm_up_to.outcome == "harm shown"
    assert be.improvement_from is not None and be.improvement_from.label == "c16"
    assert be.improvement_from.interval.lo == 1.08  # the interval that states it travels with it
    assert be.text.startswith("crosses over between c2 and c16: harm shown up to c2 (p90 TTFT 1.50x [1.30, 1.70] vs "
                              "baseline at c2 (harm above 1.10x)), improvement from c16 (output_tokens_per_s")
    assert be.text.endswith("; c8 settled neither")


def test_harm_and_improvement_meeting_at_a_step_is_still_one_crossing() -> None:
    rows = [harm(0), harm(1), row(1, "improvement shown", lo=1.2), row(2, "improvement shown"), within(3),
            row(3, "improvement shown")]
    be = break_even(rows, STEPS)
    assert be is not None and be.status == "crossover"
    assert be.harm_up_to is not None and be.harm_up_to.label == "c8"
    assert be.improvement_from is not None and be.improvement_from.label == "c8"
    assert be.text.startswith("crosses over at c8: harm shown up to c8")
    assert be.text.endswith("at c8 both are shown (a trade-off between the measures)")
    # a band interrupted by a step that shows only one of them is no single crossing
    rows = [harm(0), row(0, "improvement shown"), row(1, "improvement shown"), harm(2), row(2, "improvement shown")]
    be = break_even(rows, STEPS)
    assert be is not None and be.status == "mixed"


def test_worse_shown_counts_as_hurting_and_says_so() -> None:
    rows = [row(0, "worse shown", ratio=0.8, lo=0.75, hi=0.85), row(1, "improvement shown"), within(0), within(1)]
    be = break_even(rows, STEPS[:2])
    assert be is not None and be.status == "crossover"
    assert "shown worse than baseline up to c2" in be.text


def test_non_monotone_answers_are_mixed_not_a_break_even() -> None:
    rows = [row(0, "improvement shown"), harm(1), row(2, "improvement shown"), row(3, "not settled", lo=1.0)]
    be = break_even(rows, STEPS)
    assert be is not None and be.status == "mixed"
    assert be.improvement_steps == ["c2", "c16"] and be.harm_steps == ["c8"]
    assert be.text.startswith("no single break-even: improvement shown at c2, c16, harm or worse at c8")
    # helps at low load and hurts at high load: harm above the improvement is no break-even either
    be = break_even([row(0, "improvement shown"), harm(3)], STEPS)
    assert be is not None and be.status == "mixed"
    # improvement and harm at the same step
    be = break_even([row(2, "improvement shown"), harm(2)], STEPS)
    assert be is not None and be.status == "mixed"


def test_helps_from_a_step_and_harm_only() -> None:
    be = break_even([row(0, "not settled", lo=0.98), row(1, "improvement shown"), row(2, "not settled", lo=1.0),
                     row(3, "improvement shown")], STEPS)
    assert be is not None and be.status == "helps-from" and be.improvement_from is not None
    assert be.improvement_from.label == "c8" and "not shown at c2, c16, no harm shown" in be.text
    be = break_even([harm(0), harm(1, lo=1.9, ratio=2.0, hi=2.2), within(2)], STEPS[:3])
    assert be is not None and be.status == "harm-only" and be.harm_up_to is not None
    assert be.harm_up_to.label == "c8" and be.text.startswith("improvement never shown; harm shown at c2, c8")
    be = break_even([harm(i) for i in range(4)], STEPS)
    assert be is not None and "harm shown at every step tested" in be.text


def test_load_order_not_step_order_and_no_rows() -> None:
    steps = [StepSummary(index=0, label="c32", concurrency=32), StepSummary(index=1, label="c2", concurrency=2)]
    rows = [EffectRow.model_validate({**row(0, "improvement shown").model_dump(), "label": "c32"}),
            EffectRow.model_validate({**harm(1).model_dump(), "label": "c2"})]
    be = break_even(rows, steps)
    assert be is not None and be.status == "crossover" and be.steps == ["c2", "c32"]
    assert break_even([], STEPS) is None
