"""Baseline drift across the runs of a results folder: change points per scenario, arm and deciding measure.

Scheduled CI runs the same scenario night after night; the index shows their trend, and this module says where a
level moved (a new engine image, a driver, a noisy runner) and by how much, with the significance of each change
(the rule, its penalty and its permutation test are in :mod:`harness.stats.changepoint`).

How runs are grouped into one history: the runs of one scenario (the window the index's trend chart shows, the
newest :data:`harness.report.index.MAX_TREND_RUNS`, at most :data:`MAX_HISTORY`) with the same engine kind and model,
per arm and per measure (:data:`MEASURES`), each at the same step: the step that is the arm's highest-load step in
the newest run of the history, matched by label (a run without that step, or without a figure there, leaves a gap).
The engine image is *not* part of the group: a new image is the most common reason a baseline moves, and splitting
the history at each image would hide exactly that; instead every change point names the image before and after it.
A p99 the step could not resolve ("at least") is no figure to compare and is left out, like NaNs, infinities and
non-positive values. Nothing here raises on odd input: a history that cannot be tested carries the reason.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from harness.core.boundary import short_message
from harness.schema.summary import StepSummary, Summary
from harness.stats import changepoint


@dataclass(frozen=True)
class Measure:
    """A deciding measure read from a step."""

    key: str
    label: str
    unit: str
    lower_is_better: bool


MEASURES = (
    Measure("ttft_p99_ms", "p99 TTFT", "ms", True),
    Measure("itl_p99_ms", "p99 ITL", "ms", True),
    Measure("output_tokens_per_s", "output tokens/s", "tok/s", False),
)
FAMILY_ALPHA = 0.05  # false-alarm rate per scenario, split evenly (Bonferroni) over the histories tested in it
MAX_HISTORY = 120  # runs per history tested, the newest (PELT's search grows with the square of the runs)
StepMeasures = dict[str, dict[str, dict[str, float | None]]]  # arm -> step label -> measure key -> value


class DriftRun(Protocol):
    """What one run contributes (an index entry has these fields)."""

    @property
    def run_dir(self) -> str: ...
    @property
    def started_at(self) -> str | None: ...
    @property
    def engine(self) -> str | None: ...
    @property
    def model(self) -> str | None: ...
    @property
    def image(self) -> str | None: ...
    @property
    def top_step(self) -> dict[str, str]: ...
    @property
    def step_measures(self) -> StepMeasures: ...


class DriftPoint(BaseModel):
    """One change point: the first run at the new level, the medians either side and the test's p-value."""

    model_config = ConfigDict(extra="forbid")
    scenario: str
    engine: str | None
    model: str | None
    arm: str
    measure: str
    measure_label: str
    unit: str
    step: str
    run_dir: str
    started_at: str | None
    run_index: int  # position among the scenario's charted runs (oldest 0)
    before_median: float
    after_median: float
    ratio: float  # after / before
    p_value: float
    alpha: float  # what p had to reach: the scenario's family alpha over its tested histories
    n_before: int
    n_after: int
    worse: bool  # the move is against the measure (a slower TTFT, fewer tokens/s)
    image_before: str | None
    image_after: str | None


class DriftSeries(BaseModel):
    """One history looked at: how many runs carry the figure, whether it was tested, what was found."""

    model_config = ConfigDict(extra="forbid")
    scenario: str
    engine: str | None
    model: str | None
    arm: str
    measure: str
    step: str
    runs: int
    tested: bool
    alpha: float | None = None  # the p-value this history had to reach (the scenario's alpha over its histories)
    change_points: int = 0
    note: str = ""


class DriftReport(BaseModel):
    """Every scenario's change points and histories, with the rule's settings (index.json ``drift``)."""

    model_config = ConfigDict(extra="forbid")
    method: str = changepoint.METHOD
    family_alpha: float = FAMILY_ALPHA  # per scenario, over all its histories
    min_runs: int = changepoint.MIN_RUNS
    min_shift: float = changepoint.MIN_SHIFT
    max_runs: int = 0  # runs per scenario looked at (the newest)
    points: list[DriftPoint] = Field(default_factory=list)
    series: list[DriftSeries] = Field(default_factory=list)

    def untested(self) -> list[tuple[str, str, int]]:
        """(scenario, note, histories) for the histories not tested, one line per scenario and reason."""
        counts: dict[tuple[str, str], int] = {}
        for s in self.series:
            if not s.tested:
                counts[(s.scenario, s.note)] = counts.get((s.scenario, s.note), 0) + 1
        return [(scenario, note, n) for (scenario, note), n in counts.items()]


def _figure(value: float | None) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return out if math.isfinite(out) and out > 0 else None


def _step_values(step: StepSummary) -> dict[str, float | None]:
    def p99(ttft: bool) -> float | None:
        pct = step.ttft_ms if ttft else step.itl_ms
        unresolved = pct.p99_ci is not None and not pct.p99_ci.resolved
        return None if unresolved else _figure(pct.p99)

    return {"ttft_p99_ms": p99(True), "itl_p99_ms": p99(False),
            "output_tokens_per_s": _figure(step.output_tokens_per_s)}


def step_measures(summary: Summary) -> StepMeasures:
    """Per arm and step label, the deciding measures (None: not a comparable figure)."""
    out: StepMeasures = {}
    for arm in summary.arms:
        steps = out.setdefault(arm.name, {})
        for step in arm.steps:
            steps[step.label] = _step_values(step)  # a repeated label: the later (higher-load) step
    return out


def top_steps(summary: Summary) -> dict[str, str]:
    """Per arm, the label of its highest-load (last) step."""
    return {arm.name: arm.steps[-1].label for arm in summary.arms if arm.steps}


def engine_image(summary: Summary) -> str | None:
    """The engine image the run used (``tag@digest`` where the digest was recorded), from the first launch record."""
    for arm in summary.arms:
        if arm.launch is not None and (arm.launch.image or arm.launch.image_digest):
            image, digest = arm.launch.image or "", arm.launch.image_digest or ""
            return f"{image}@{digest}" if image and digest and "@" not in image else image or digest
    return None


def _seed(*parts: str | None) -> int:
    return zlib.crc32("\x1f".join(p or "" for p in parts).encode("utf-8", "replace"))


Present = list[tuple[int, DriftRun, float]]  # (position among the scenario's runs, run, figure), oldest first


def _present(runs: Sequence[tuple[int, DriftRun]], arm: str, measure: Measure) -> tuple[str, Present]:
    """The history's step (the arm's top step in its newest run) and the runs with a figure there."""
    step = next((r.top_step[arm] for _, r in reversed(runs) if arm in r.top_step), "")
    points = [(i, r, _figure(r.step_measures.get(arm, {}).get(step, {}).get(measure.key))) for i, r in runs]
    return step, [(i, r, v) for i, r, v in points if v is not None]


def _history(scenario: str, runs: Sequence[tuple[int, DriftRun]], arm: str, measure: Measure, step: str,
             present: Present, alpha: float) -> tuple[DriftSeries, list[DriftPoint]]:
    engine, model = runs[-1][1].engine, runs[-1][1].model
    series = DriftSeries(scenario=scenario, engine=engine, model=model, arm=arm, measure=measure.key, step=step,
                         runs=len(present), tested=False)
    if len(present) < changepoint.MIN_RUNS:
        return series.model_copy(update={"note": changepoint.too_few(len(present))}), []
    try:
        test = changepoint.detect([v for _, _, v in present], alpha=alpha,
                                  seed=_seed(scenario, engine, model, arm, measure.key))
    except Exception as exc:  # a history that cannot be tested says why; the index goes on
        return series.model_copy(update={"note": f"not tested: {short_message(exc)}"}), []
    found: list[DriftPoint] = []
    for cp in test.change_points:
        index, run, _ = present[cp.index]
        before = present[cp.index - 1][1]
        found.append(DriftPoint(
            scenario=scenario, engine=engine, model=model, arm=arm, measure=measure.key,
            measure_label=measure.label, unit=measure.unit, step=step, run_dir=run.run_dir,
            started_at=run.started_at, run_index=index, before_median=cp.before_median,
            after_median=cp.after_median, ratio=cp.ratio, p_value=cp.p_value, alpha=alpha, n_before=cp.n_before,
            n_after=cp.n_after, worse=(cp.ratio > 1) == measure.lower_is_better, image_before=before.image,
            image_after=run.image))
    update = {"tested": test.tested, "note": test.note, "change_points": len(found), "alpha": alpha}
    return series.model_copy(update=update), found


def scenario_drift(scenario: str, runs: Sequence[DriftRun]) -> tuple[list[DriftSeries], list[DriftPoint]]:
    """Histories and change points of one scenario's runs (oldest first), grouped by engine and model."""
    groups: dict[tuple[str | None, str | None], list[tuple[int, DriftRun]]] = {}
    first = max(0, len(runs) - MAX_HISTORY)
    for i, run in enumerate(runs[first:], start=first):
        groups.setdefault((run.engine, run.model), []).append((i, run))
    histories: list[tuple[list[tuple[int, DriftRun]], str, Measure, str, Present]] = []
    for members in groups.values():
        arms: list[str] = []
        for _, run in members:
            arms.extend(a for a in run.step_measures if a not in arms)
        for arm in arms:
            for measure in MEASURES:
                step, present = _present(members, arm, measure)
                if step:
                    histories.append((members, arm, measure, step, present))
    tested = sum(1 for *_, present in histories if len(present) >= changepoint.MIN_RUNS)
    alpha = FAMILY_ALPHA / max(1, tested)
    series: list[DriftSeries] = []
    points: list[DriftPoint] = []
    for members, arm, measure, step, present in histories:
        s, p = _history(scenario, members, arm, measure, step, present, alpha)
        series.append(s)
        points.extend(p)
    return series, points


def change_text(point: DriftPoint) -> str:
    """``2,650 → 3,190 ms (+20.4%, worse)``."""
    def fmt(v: float) -> str:
        return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"

    word = "worse" if point.worse else "better"
    return (f"{fmt(point.before_median)} → {fmt(point.after_median)} {point.unit} "
            f"({(point.ratio - 1) * 100:+.1f}%, {word})")


def p_text(p: float) -> str:
    """A p-value as shown (the permutation test's floor, 1/(B+1), is written as ``≤ 0.0005``)."""
    floor = 1.0 / (1 + changepoint.PERMUTATIONS)
    return f"≤ {floor:.2g}" if p <= floor * (1 + 1e-9) else f"{p:.2g}"


def image_text(point: DriftPoint) -> str:
    """Whether the engine image changed at this run."""
    if point.image_before == point.image_after:
        return "same image"
    return f"image {point.image_before or 'unknown'} → {point.image_after or 'unknown'}"


def marker_label(point: DriftPoint) -> str:
    """The short label a trend chart puts on the change point's line."""
    return f"{point.arm} {point.measure_label} ×{point.ratio:.2f}"
