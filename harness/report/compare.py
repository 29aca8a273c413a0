"""``harness compare RUN_A RUN_B``: what changed between two runs, per arm and step, with B/A ratios.

Arms are matched by name and steps by index (a step whose load differs is flagged). A value missing on either
side gives no ratio; it is never read as 0.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from harness.report.fmt import ms, num, pct, ratio
from harness.summary import ArmSummary, StepSummary, Summary

# A ratio outside [1 - CHANGE, 1 + CHANGE] is called a change in the text output.
CHANGE = 0.10


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MetricChange(_Model):
    """One figure in A and B, and B/A."""

    a: float | None
    b: float | None
    ratio: float | None

    @property
    def changed(self) -> bool:
        """Whether B differs from A by more than :data:`CHANGE` (or one side is missing)."""
        if self.a is None or self.b is None:
            return self.a is not None or self.b is not None
        if self.a == self.b:
            return False
        return self.ratio is None or abs(self.ratio - 1.0) > CHANGE


class StepChange(_Model):
    """One step matched across the runs."""

    index: int
    label_a: str | None
    label_b: str | None
    load_differs: bool
    ttft_p99_ms: MetricChange
    itl_p99_ms: MetricChange
    output_tokens_per_s: MetricChange
    hit_rate: MetricChange
    error_rate: MetricChange


class ArmChange(_Model):
    """One arm matched by name (``decision_a``/``decision_b`` is None where the run lacks the arm)."""

    name: str
    decision_a: str | None
    decision_b: str | None
    decision_changed: bool
    steps: list[StepChange] = Field(default_factory=list)


class Comparison(_Model):
    """The whole comparison, as printed or emitted with ``--json``."""

    run_a: str
    run_b: str
    scenario_a: str
    scenario_b: str
    same_scenario: bool
    simulated_a: bool
    simulated_b: bool
    verdict_a: str
    verdict_b: str
    recommended_a: str | None
    recommended_b: str | None
    arms: list[ArmChange]


def _change(a: float | None, b: float | None) -> MetricChange:
    r = None if a is None or b is None or a == 0 else b / a
    return MetricChange(a=a, b=b, ratio=r)


def _step_change(index: int, a: StepSummary | None, b: StepSummary | None) -> StepChange:
    def get(step: StepSummary | None, what: str) -> float | None:
        if step is None:
            return None
        value: float | None = {
            "ttft": step.ttft_ms.p99, "itl": step.itl_ms.p99, "tps": step.output_tokens_per_s,
            "hit": step.hit_tokens.hit_rate(), "err": step.error_rate,
        }[what]
        return value

    differs = a is None or b is None or (a.concurrency, a.rate_rps) != (b.concurrency, b.rate_rps)
    return StepChange(index=index, label_a=a.label if a else None, label_b=b.label if b else None,
                      load_differs=differs, ttft_p99_ms=_change(get(a, "ttft"), get(b, "ttft")),
                      itl_p99_ms=_change(get(a, "itl"), get(b, "itl")),
                      output_tokens_per_s=_change(get(a, "tps"), get(b, "tps")),
                      hit_rate=_change(get(a, "hit"), get(b, "hit")), error_rate=_change(get(a, "err"), get(b, "err")))


def _arm_change(name: str, a: ArmSummary | None, b: ArmSummary | None) -> ArmChange:
    steps_a = {s.index: s for s in a.steps} if a else {}
    steps_b = {s.index: s for s in b.steps} if b else {}
    indices = sorted(set(steps_a) | set(steps_b))
    return ArmChange(name=name, decision_a=a.decision if a else None, decision_b=b.decision if b else None,
                     decision_changed=(a.decision if a else None) != (b.decision if b else None),
                     steps=[_step_change(i, steps_a.get(i), steps_b.get(i)) for i in indices])


def compare_summaries(a: Summary, b: Summary) -> Comparison:
    """Compare run B with run A (the older one, usually)."""
    arms_a = {arm.name: arm for arm in a.arms}
    arms_b = {arm.name: arm for arm in b.arms}
    names = [arm.name for arm in a.arms] + [arm.name for arm in b.arms if arm.name not in arms_a]
    return Comparison(
        run_a=a.run_id, run_b=b.run_id, scenario_a=a.scenario, scenario_b=b.scenario,
        same_scenario=a.scenario_hash == b.scenario_hash, simulated_a=a.simulated, simulated_b=b.simulated,
        verdict_a=a.verdict, verdict_b=b.verdict, recommended_a=a.recommended_arm, recommended_b=b.recommended_arm,
        arms=[_arm_change(n, arms_a.get(n), arms_b.get(n)) for n in names])


def _fmt(value: float | None, kind: str) -> str:
    if kind == "ms":
        return ms(value, "—")
    if kind == "pct":
        return pct(value, 1, "—")
    return num(value, 1, "—")


def _cell(change: MetricChange, kind: str) -> str:
    mark = " *" if change.changed else ""
    return f"{_fmt(change.a, kind)} → {_fmt(change.b, kind)} ({ratio(change.ratio)}){mark}"


def comparison_lines(cmp: Comparison) -> list[str]:
    """A plain-text rendering (one line per fact; ``*`` marks a change over 10% or a value that appeared/vanished)."""
    lines = [f"A: {cmp.run_a} ({cmp.scenario_a}{', SIMULATED' if cmp.simulated_a else ''})",
             f"B: {cmp.run_b} ({cmp.scenario_b}{', SIMULATED' if cmp.simulated_b else ''})"]
    if not cmp.same_scenario:
        lines.append("note: the scenario hashes differ; differences may come from the scenario, not the software")
    lines.append(f"verdict: {cmp.verdict_a} → {cmp.verdict_b}; recommended: {cmp.recommended_a or 'none'} → "
                 f"{cmp.recommended_b or 'none'}")
    for arm in cmp.arms:
        mark = " *" if arm.decision_changed else ""
        lines.append(f"arm {arm.name}: {arm.decision_a or 'absent'} → {arm.decision_b or 'absent'}{mark}")
        for st in arm.steps:
            label = st.label_a or st.label_b or str(st.index)
            note = " (load differs)" if st.load_differs else ""
            lines.append(f"  {label}{note}: p99 TTFT {_cell(st.ttft_p99_ms, 'ms')}; "
                         f"p99 ITL {_cell(st.itl_p99_ms, 'ms')}; "
                         f"out tok/s {_cell(st.output_tokens_per_s, 'num')}; "
                         f"hit rate {_cell(st.hit_rate, 'pct')}; errors {_cell(st.error_rate, 'pct')}")
    return lines
