"""Every step the break-even counts neither as improving nor as hurting carries why, as data: an effect its noise
floor absorbed (with the floor, the row and the end its interval had to pass), not settled, neither shown, not
judged, host-contended; the report names the step with its floor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.decision.break_even import break_even
from harness.report.effects import break_even_line
from harness.schema.intervals import RatioCI
from harness.schema.summary import ArmSummary, BreakEven, EffectRow, StepSummary, Summary

RUNS = Path(__file__).resolve().parents[2] / "fixtures" / "runs"
LOADS = (8, 16, 32)
STEPS = [StepSummary(index=i, label=f"c{c}", concurrency=c) for i, c in enumerate(LOADS)]


def be_arm(be: BreakEven) -> ArmSummary:
    return ArmSummary(name="cpu-16g-disk", tier="tiered", decision="hold", break_even=be)


def keep(step: int, lo: float, hi: float, *, floor: float = 1.0, outcome: str, measure: str = "ttft_p95",
         resolved: bool = True) -> EffectRow:
    return EffectRow(rule="earns-its-keep", test="improvement", measure=measure, step=step, label=f"c{LOADS[step]}",
                     concurrency=LOADS[step], versus="cpu-16g", floor=floor, limit=round(1.05 * floor, 4),
                     interval=RatioCI(ratio=(lo + hi) / 2, lo=lo, hi=hi, resolved=resolved, confidence=0.996),
                     outcome=outcome)


def harm(step: int, lo: float, hi: float, *, floor: float = 1.0, outcome: str) -> EffectRow:
    return EffectRow(rule="ttft-p90-vs-baseline", test="harm", measure="p90 TTFT", step=step,
                     label=f"c{LOADS[step]}", concurrency=LOADS[step], versus="baseline", floor=floor,
                     limit=round(1.10 * floor, 4), pass_limit=round(1.10 / floor, 4),
                     interval=RatioCI(ratio=(lo + hi) / 2, lo=lo, hi=hi, resolved=True, confidence=0.992),
                     outcome=outcome)


def test_a_worse_step_inside_its_larger_floor_is_not_counted_and_says_why() -> None:
    # the disk arm: worse at c8 and c16; at c32 the lowest point estimate, but its floor 1.16 absorbs it
    rows = [keep(0, 0.85, 0.95, outcome="worse shown"), keep(1, 0.80, 0.93, outcome="worse shown"),
            keep(2, 0.70, 0.90, floor=1.16, outcome="short of the limit"),
            keep(2, 0.85, 1.10, floor=1.16, outcome="not settled", measure="output_tokens_per_s")]
    be = break_even(rows, STEPS)
    assert be is not None and be.status == "harm-only" and be.harm_steps == ["c8", "c16"]
    (why,) = be.not_counted
    assert (why.step, why.label, why.reason, why.side, why.floor) == (2, "c32", "inside-noise-floor", "worse", 1.16)
    assert why.needed == pytest.approx(1 / 1.16, abs=1e-4) and why.row is not None
    assert why.row.measure == "ttft_p95" and why.row.interval.hi == 0.90  # the row that would have counted
    line = break_even_line(be_arm(be))
    for figure in ("c32", "1.16x", "0.86x", "0.90"):
        assert figure in line


def test_an_improvement_and_a_harm_inside_the_floor_name_their_needed_end() -> None:
    rows = [keep(0, 1.08, 1.30, floor=1.06, outcome="not settled"),
            harm(0, 0.8, 1.0, floor=1.06, outcome="within limit"),
            keep(1, 0.98, 1.2, outcome="not settled"), harm(1, 1.12, 1.4, floor=1.05, outcome="not settled"),
            keep(2, 1.2, 1.4, outcome="improvement shown"), harm(2, 0.8, 0.9, outcome="within limit")]
    be = break_even(rows, STEPS)
    assert be is not None and be.improvement_steps == ["c32"]
    by_step = {w.label: w for w in be.not_counted}
    assert set(by_step) == {"c8", "c16"}
    assert (by_step["c8"].reason, by_step["c8"].side, by_step["c8"].needed) == ("inside-noise-floor", "improvement",
                                                                               round(1.05 * 1.06, 4))
    assert (by_step["c16"].reason, by_step["c16"].side, by_step["c16"].needed) == ("inside-noise-floor", "harm",
                                                                                 round(1.10 * 1.05, 4))


def test_the_other_reasons_a_step_is_not_counted() -> None:
    rows = [keep(0, 0.98, 1.2, outcome="not settled"), harm(0, 0.8, 1.0, outcome="within limit"),
            keep(1, 0.90, 1.02, outcome="short of the limit"), harm(1, 0.8, 1.0, outcome="within limit"),
            keep(2, 0.9, 1.2, outcome="not judged", resolved=False)]
    be = break_even(rows, STEPS)
    assert be is not None and be.status == "never-shown"
    assert [(w.label, w.reason) for w in be.not_counted] == [("c8", "not-settled"), ("c16", "neither-shown"),
                                                             ("c32", "not-judged")]
    contended = keep(2, 0.9, 1.2, outcome="host-contended")
    be = break_even([*rows[:4], contended], STEPS)
    assert be is not None and [(w.label, w.reason) for w in be.not_counted][-1] == ("c32", "host-contended")
    be = break_even([contended], STEPS)
    assert be is not None and [(w.label, w.reason) for w in be.not_counted] == [("c32", "host-contended")]


def test_a_floor_of_one_absorbs_nothing() -> None:
    be = break_even([keep(0, 0.9, 0.99, outcome="worse shown"), keep(1, 0.9, 1.01, outcome="not settled")], STEPS[:2])
    assert be is not None and [(w.label, w.reason) for w in be.not_counted] == [("c16", "not-settled")]


def test_the_quiet_demos_disk_arm_names_c16_inside_its_floor() -> None:
    summary = Summary.model_validate(json.loads((RUNS / "demo-quiet-precut" / "summary.json").read_text()))
    disk = next(a for a in summary.arms if a.name == "cpu-16g-disk")
    be = break_even(disk.effects, disk.steps)
    assert be is not None and be.harm_steps == ["c8", "c32"]
    (why,) = be.not_counted
    assert (why.label, why.reason, why.side, why.floor) == ("c16", "inside-noise-floor", "worse", 1.0595)
    assert why.row is not None and why.row.measure == "output_tokens_per_s"
    assert 1 / 1.0595 <= (why.row.interval.hi or 0) < 1.0
