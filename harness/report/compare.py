"""``harness compare RUN_A RUN_B``: what changed between two runs, per arm and step, with B/A ratios.

Arms are matched by name and steps by index (a step whose load differs is flagged). A value missing on either
side gives no ratio; it is never read as 0. Percentiles carry their interval and n; a ratio carries its interval
when :mod:`harness.report.compare_ratios` computed one from the runs' ``requests.parquet``. Marks: ``*`` a change
(the ratio's interval excludes 1 and the ratio is outside 0.9–1.1; without an interval, outside 0.9–1.1), ``?``
cannot tell (the ratio's interval, or a percentile on either side, is unresolved).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from harness.report.fmt import ms, num, pct, ratio
from harness.report.fmt_ci import interval_view, ratio_view
from harness.schema.intervals import QuantileCI, RatioCI
from harness.schema.summary import ArmSummary, StepSummary, Summary

# A ratio outside [1 - CHANGE, 1 + CHANGE] is called a change in the text output.
CHANGE = 0.10


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MetricChange(_Model):
    """One figure in A and B, and B/A."""

    a: float | None
    b: float | None
    ratio: float | None
    a_ci: QuantileCI | None = None  # percentiles: each side's interval and n
    b_ci: QuantileCI | None = None
    a_n: int | None = None
    b_n: int | None = None
    interval: RatioCI | None = None  # B/A with its interval (from the requests), when computed

    @property
    def unresolved(self) -> bool:
        """The data cannot say whether B differs: the ratio's interval, or a side's percentile, is unresolved."""
        if self.a is None or self.b is None:
            return False
        if self.interval is not None:
            return not self.interval.resolved
        return any(ci is not None and not ci.resolved for ci in (self.a_ci, self.b_ci))

    @property
    def changed(self) -> bool:
        """Whether B differs from A: the interval excludes 1 and the ratio is off by more than :data:`CHANGE`
        (without an interval: the ratio alone), or one side is missing. Never for an unresolved comparison."""
        if self.a is None or self.b is None:
            return self.a is not None or self.b is not None
        if self.unresolved:
            return False
        iv = self.interval
        if iv is not None and iv.lo is not None and iv.hi is not None and iv.ratio is not None:
            return (iv.lo > 1.0 or iv.hi < 1.0) and abs(iv.ratio - 1.0) > CHANGE
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
    ratio_source: str = "summaries only: ratios have no interval"


Intervals = dict[tuple[str, int, str], RatioCI]  # (arm, step index, measure) -> B/A


def _change(a: float | None, b: float | None, interval: RatioCI | None = None) -> MetricChange:
    r = None if a is None or b is None or a == 0 else b / a
    return MetricChange(a=a, b=b, ratio=r, interval=interval if a is not None and b is not None else None)


def _pct_change(a: StepSummary | None, b: StepSummary | None, metric: str, interval: RatioCI | None) -> MetricChange:
    pa = getattr(a, metric) if a is not None else None
    pb = getattr(b, metric) if b is not None else None
    change = _change(pa.p99 if pa else None, pb.p99 if pb else None, interval)
    return change.model_copy(update={"a_ci": pa.p99_ci if pa else None, "b_ci": pb.p99_ci if pb else None,
                                     "a_n": pa.count if pa else None, "b_n": pb.count if pb else None})


def _step_change(index: int, a: StepSummary | None, b: StepSummary | None,
                 intervals: dict[str, RatioCI] | None = None) -> StepChange:
    def get(step: StepSummary | None, what: str) -> float | None:
        if step is None:
            return None
        value: float | None = {
            "ttft": step.ttft_ms.p99, "itl": step.itl_ms.p99, "tps": step.output_tokens_per_s,
            "hit": step.hit_tokens.hit_rate(), "err": step.error_rate,
        }[what]
        return value

    differs = a is None or b is None or (a.concurrency, a.rate_rps) != (b.concurrency, b.rate_rps)
    iv = intervals or {}
    return StepChange(index=index, label_a=a.label if a else None, label_b=b.label if b else None,
                      load_differs=differs, ttft_p99_ms=_pct_change(a, b, "ttft_ms", iv.get("ttft_p99_ms")),
                      itl_p99_ms=_pct_change(a, b, "itl_ms", iv.get("itl_p99_ms")),
                      output_tokens_per_s=_change(get(a, "tps"), get(b, "tps"), iv.get("output_tokens_per_s")),
                      hit_rate=_change(get(a, "hit"), get(b, "hit")), error_rate=_change(get(a, "err"), get(b, "err")))


def _arm_change(name: str, a: ArmSummary | None, b: ArmSummary | None, intervals: Intervals) -> ArmChange:
    steps_a = {s.index: s for s in a.steps} if a else {}
    steps_b = {s.index: s for s in b.steps} if b else {}
    indices = sorted(set(steps_a) | set(steps_b))
    return ArmChange(name=name, decision_a=a.decision if a else None, decision_b=b.decision if b else None,
                     decision_changed=(a.decision if a else None) != (b.decision if b else None),
                     steps=[_step_change(i, steps_a.get(i), steps_b.get(i),
                                         {m: ci for (arm, st, m), ci in intervals.items() if arm == name and st == i})
                            for i in indices])


def compare_summaries(a: Summary, b: Summary, intervals: Intervals | None = None,
                      ratio_source: str | None = None) -> Comparison:
    """Compare run B with run A (the older one, usually); ``intervals`` are B/A ratio intervals by
    (arm, step index, measure) — see :func:`harness.report.compare_ratios.compare_runs`."""
    arms_a = {arm.name: arm for arm in a.arms}
    arms_b = {arm.name: arm for arm in b.arms}
    names = [arm.name for arm in a.arms] + [arm.name for arm in b.arms if arm.name not in arms_a]
    return Comparison(
        run_a=a.run_id, run_b=b.run_id, scenario_a=a.scenario, scenario_b=b.scenario,
        same_scenario=a.scenario_hash == b.scenario_hash, simulated_a=a.simulated, simulated_b=b.simulated,
        verdict_a=a.verdict, verdict_b=b.verdict, recommended_a=a.recommended_arm, recommended_b=b.recommended_arm,
        arms=[_arm_change(n, arms_a.get(n), arms_b.get(n), intervals or {}) for n in names],
        ratio_source=ratio_source or "summaries only: ratios have no interval")


def _fmt(value: float | None, kind: str) -> str:
    if kind == "ms":
        return ms(value, "—")
    if kind == "pct":
        return pct(value, 1, "—")
    return num(value, 1, "—")


def _side(value: float | None, ci: QuantileCI | None, n: int | None, kind: str) -> str:
    if kind == "pctl" and value is not None:
        return interval_view(value, ci, count=n or 0).text
    return _fmt(value, "ms" if kind == "pctl" else kind)


def _ratio_text(change: MetricChange) -> str:
    if change.interval is not None:
        return ratio_view(change.interval).text
    if change.unresolved:
        return f"unresolved (point {ratio(change.ratio)})"
    return ratio(change.ratio)


def _cell(change: MetricChange, kind: str) -> str:
    mark = " ?" if change.unresolved else " *" if change.changed else ""
    return (f"{_side(change.a, change.a_ci, change.a_n, kind)} → {_side(change.b, change.b_ci, change.b_n, kind)} "
            f"(B/A {_ratio_text(change)}){mark}")


def comparison_lines(cmp: Comparison) -> list[str]:
    """A plain-text rendering (one line per fact; ``*`` marks a change over 10% or a value that appeared/vanished)."""
    lines = [f"A: {cmp.run_a} ({cmp.scenario_a}{', SIMULATED' if cmp.simulated_a else ''})",
             f"B: {cmp.run_b} ({cmp.scenario_b}{', SIMULATED' if cmp.simulated_b else ''})"]
    if not cmp.same_scenario:
        lines.append("note: the scenario hashes differ; differences may come from the scenario, not the software")
    lines.append(f"verdict: {cmp.verdict_a} → {cmp.verdict_b}; recommended: {cmp.recommended_a or 'none'} → "
                 f"{cmp.recommended_b or 'none'}")
    lines.append(f"ratio intervals: {cmp.ratio_source}")
    lines.append("marks: * changed (interval excludes 1, ratio outside 0.9–1.1); ? cannot tell (unresolved); "
                 "≥ x: a percentile the sample bounds from below only")
    for arm in cmp.arms:
        mark = " *" if arm.decision_changed else ""
        lines.append(f"arm {arm.name}: {arm.decision_a or 'absent'} → {arm.decision_b or 'absent'}{mark}")
        for st in arm.steps:
            label = st.label_a or st.label_b or str(st.index)
            note = " (load differs)" if st.load_differs else ""
            lines.append(f"  {label}{note}:")
            lines.append(f"    p99 TTFT   {_cell(st.ttft_p99_ms, 'pctl')}")
            lines.append(f"    p99 ITL    {_cell(st.itl_p99_ms, 'pctl')}")
            lines.append(f"    out tok/s  {_cell(st.output_tokens_per_s, 'num')}")
            lines.append(f"    hit rate   {_cell(st.hit_rate, 'pct')}; errors {_cell(st.error_rate, 'pct')}")
    return lines
