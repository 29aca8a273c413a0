"""The forest plot's rows and axis, read from ``ArmSummary.effects`` (:mod:`harness.decision.effects`).

Nothing is recomputed: one row per (arm, step, measure) comparison a rule made, grouped by arm and, within an arm,
by test (improvement rows: > 1 = better; harm rows: > 1 = worse, so each block says its direction), with the
effect table's own text for the ratio. The axis is logarithmic, 0.5x-2x widened to the data, never past 0.2x-5x.
The plot is :mod:`harness.report.forest`, the drawing :mod:`harness.report.forest_draw`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.report.effects import effect_views, measure_name
from harness.schema.intervals import RatioCI
from harness.schema.summary import ArmSummary, EffectRow, Summary

# Outcome -> colour (Okabe-Ito based, one colour per outcome so the legend is unambiguous), in legend order.
OUTCOME_COLOURS: dict[str, str] = {
    "improvement shown": "#1b7f3b",
    "within limit": "#0072b2",
    "short of the limit": "#cc79a7",
    "not settled": "#e69f00",
    "worse shown": "#d55e00",
    "harm shown": "#b00020",
    "not judged": "#718096",
    "host-contended": "#4a5568",
}
AXIS_MIN, AXIS_MAX = 0.2, 5.0  # the widest axis; anything beyond is clipped and marked
_DEFAULT_SPAN = (0.5, 2.0)
_TEST_TITLES = {"improvement": "improvement: this arm / the arm without its newest tier, > 1 = better",
                "harm": "harm: this arm / the baseline, > 1 = worse"}


def outcome_colour(outcome: str) -> str:
    """The colour of an outcome (grey for one this version does not know)."""
    return OUTCOME_COLOURS.get(outcome, "#718096")


def finite(value: float | None) -> float | None:
    """A ratio bound usable on a log axis (positive and finite), else None."""
    return value if value is not None and math.isfinite(value) and value > 0 else None


@dataclass(frozen=True)
class Axis:
    """A log axis from ``lo`` to ``hi`` (ratios) over ``x0``..``x1`` pixels."""

    lo: float
    hi: float
    x0: float
    x1: float

    def x(self, value: float) -> float:
        """The pixel of a ratio, clamped to the axis."""
        v = min(max(value, self.lo), self.hi)
        share = (math.log(v) - math.log(self.lo)) / (math.log(self.hi) - math.log(self.lo))
        return self.x0 + share * (self.x1 - self.x0)

    def inside(self, value: float) -> bool:
        return self.lo <= value <= self.hi


def axis_span(rows: list[EffectRow]) -> tuple[float, float]:
    """The axis range: 0.5x-2x, widened to every finite point, bound and limit, at most 0.2x-5x."""
    values = [v for r in rows for v in (finite(r.interval.ratio), finite(r.interval.lo), finite(r.interval.hi),
                                        finite(r.limit), finite(r.pass_limit)) if v is not None]
    lo = min([_DEFAULT_SPAN[0], *[v / 1.08 for v in values]])
    hi = max([_DEFAULT_SPAN[1], *[v * 1.08 for v in values]])
    return max(lo, AXIS_MIN), min(hi, AXIS_MAX)


@dataclass(frozen=True)
class ForestRow:
    """One comparison as the plot draws it."""

    arm: str
    test: str
    label: str  # "c32 · p95 TTFT vs gpu-only"
    interval: RatioCI
    limit: float | None
    pass_limit: float | None
    outcome: str
    deciding: bool
    ratio_text: str  # the effect table's text: "1.51x [1.43–1.60]", "unresolved (point 0.93x)"
    resolved: bool

    @property
    def colour(self) -> str:
        return outcome_colour(self.outcome)

    @property
    def title(self) -> str:
        """The row's tooltip and accessible name: everything the row shows, in words."""
        limit = "no limit" if self.limit is None else f"limit {self.limit:.2f}"
        if self.pass_limit is not None:
            limit += f", within ≤ {self.pass_limit:.2f}"
        decided = "; decided the arm" if self.deciding else ""
        return f"{self.arm} · {self.label}: {self.ratio_text}; {limit}; {self.outcome}{decided}"


@dataclass(frozen=True)
class ForestBlock:
    """The rows of one arm and one test, in the effect table's order."""

    arm: ArmSummary
    test: str
    rows: list[ForestRow]

    @property
    def heading(self) -> str:
        return _TEST_TITLES.get(self.test, self.test)


def forest_blocks(summary: Summary) -> list[ForestBlock]:
    """Every arm's effect rows, grouped by arm then test (improvement first); empty when no arm has any."""
    usual = summary.statistics.confidence
    blocks: list[ForestBlock] = []
    for arm in summary.arms:
        views = effect_views(arm, usual)
        for test in ("improvement", "harm"):
            rows = [ForestRow(arm=arm.name, test=test, label=f"{view.step} · {measure_name(row)} vs {row.versus}",
                              interval=row.interval, limit=finite(row.limit), pass_limit=finite(row.pass_limit),
                              outcome=row.outcome, deciding=row.deciding, ratio_text=view.ratio,
                              resolved=view.resolved)
                    for row, view in zip(arm.effects, views, strict=True) if row.test == test]
            if rows:
                blocks.append(ForestBlock(arm, test, rows))
    return blocks
