"""Baseline drift across the runs of a results folder: change points per scenario, arm and deciding measure.

Scheduled CI runs the same scenario night after night; the index shows their trend, and this module says where a
level moved (a new engine image, a driver, a noisy runner) and by how much, with the significance of each change
(the rule, its penalty and its permutation test are in :mod:`harness.stats.changepoint`).

How runs are grouped into one history: the runs of one scenario (the window the index's trend chart shows, the
newest :data:`harness.report.index.MAX_TREND_RUNS`, at most :data:`MAX_HISTORY`) with the same engine kind and model,
per arm and per measure (:data:`MEASURES`), each at the same step: the step that is the arm's highest-load step in
the newest run of the history, matched by label (a run without that step, or without a figure there, leaves a gap).
The engine image, its version and the scenario's hash are *not* part of the group: a new image is the most common
reason a baseline moves, and splitting the history at each would hide exactly that; instead every change point
carries them before and after it, and one that coincides with a change of any of them is attributed to it
(:mod:`harness.report.drift_causes`). A p99 the step could not resolve ("at least") is no figure to compare and is
left out, like non-positive values; NaNs, infinities and figures beyond any measurement are left out too and listed
as invalid (:mod:`harness.report.index_figures`). Each tested history carries its run-to-run spread and the
smallest shift the rule finds at that spread, by simulation (:mod:`harness.report.drift_power`), so a quiet history
is not read as one where nothing moved. Nothing here raises on odd input: a history that cannot be tested carries
the reason.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harness.core.boundary import short_message
from harness.report.drift_causes import Cause, Coincidence, Versioned, cause, coincidences
from harness.report.drift_power import DetectableShift, detectable_shift
from harness.report.index_figures import InvalidFigure, checked, step_figures
from harness.schema.summary import Summary
from harness.stats import changepoint, detectability
from harness.stats.detectability import Estimator


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


class DriftRun(Versioned, Protocol):
    """What one run contributes (an index entry has these fields): its scenario and engine (:class:`Versioned`)
    and what the history needs besides."""

    @property
    def started_at(self) -> str | None: ...
    @property
    def engine(self) -> str | None: ...
    @property
    def model(self) -> str | None: ...
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
    scenario_hash_before: str | None = None
    scenario_hash_after: str | None = None
    engine_version_before: str | None = None
    engine_version_after: str | None = None
    coincides: list[Coincidence] = Field(default_factory=list)  # scenario/engine changes within one run of it
    cause: Cause = "drift"  # what it is attributed to: a scenario change, an engine change, else drift


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
    spread: float | None = None  # run-to-run spread: robust SD of the log figures (successive differences)
    detectable: DetectableShift | None = None  # the smallest shift the rule finds at that spread (simulated)


class DriftReport(BaseModel):
    """Every scenario's change points and histories, with the rule's settings (index.json ``drift``)."""

    model_config = ConfigDict(extra="forbid")
    method: str = changepoint.METHOD
    family_alpha: float = FAMILY_ALPHA  # per scenario, over all its histories
    min_runs: int = changepoint.MIN_RUNS
    min_shift: float = changepoint.MIN_SHIFT
    detect_power: float = detectability.POWER  # a shift counts as detectable when found this often (simulated)
    detect_method: str = detectability.METHOD
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


def _figure(value: float | None, measure: str = "ttft_p99_ms") -> float | None:
    """A comparable figure: positive and a possible measurement (None otherwise)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        out = checked("", "", measure, float(value), [])
    except (TypeError, ValueError, OverflowError):
        return None
    return out if out is not None and out > 0 else None


def step_measures(summary: Summary, invalid: list[InvalidFigure] | None = None) -> StepMeasures:
    """Per arm and step label, the deciding measures (None: not a comparable figure); figures that cannot be
    measurements are appended to ``invalid``."""
    refused = invalid if invalid is not None else []
    out: StepMeasures = {}
    for arm in summary.arms:
        steps = out.setdefault(arm.name, {})
        for step in arm.steps:  # a repeated label: the later (higher-load) step
            figures = {key: checked(arm.name, step.label, key, value, refused)
                       for key, value in step_figures(step).items()}
            steps[step.label] = {key: value if value is not None and value > 0 else None
                                 for key, value in figures.items()}
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
    points = [(i, r, _figure(r.step_measures.get(arm, {}).get(step, {}).get(measure.key), measure.key))
              for i, r in runs]
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
    history = [r for _, r, _ in present]
    for cp in test.change_points:
        index, run, _ = present[cp.index]
        before = present[cp.index - 1][1]
        near = coincidences(history, cp.index)
        found.append(DriftPoint(
            scenario=scenario, engine=engine, model=model, arm=arm, measure=measure.key,
            measure_label=measure.label, unit=measure.unit, step=step, run_dir=run.run_dir,
            started_at=run.started_at, run_index=index, before_median=cp.before_median,
            after_median=cp.after_median, ratio=cp.ratio, p_value=cp.p_value, alpha=alpha, n_before=cp.n_before,
            n_after=cp.n_after, worse=(cp.ratio > 1) == measure.lower_is_better, image_before=before.image,
            image_after=run.image, scenario_hash_before=before.scenario_hash, scenario_hash_after=run.scenario_hash,
            engine_version_before=before.engine_version, engine_version_after=run.engine_version, coincides=near,
            cause=cause(near)))
    spread = changepoint.noise_scale(np.log(np.asarray([v for _, _, v in present], dtype=np.float64)))
    update = {"tested": test.tested, "note": test.note, "change_points": len(found), "alpha": alpha,
              "spread": spread}
    return series.model_copy(update=update), found


def scenario_drift(scenario: str, runs: Sequence[DriftRun], estimator: Estimator | None = None,
                   ) -> tuple[list[DriftSeries], list[DriftPoint]]:
    """Histories and change points of one scenario's runs (oldest first), grouped by engine and model; with an
    ``estimator``, each tested history's detectable shift (the p99 TTFT histories first, while its budget lasts)."""
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
    if estimator is not None:
        order = [m.key for m in MEASURES]
        for k in sorted(range(len(series)), key=lambda k: order.index(series[k].measure)):
            if series[k].tested:
                series[k] = series[k].model_copy(update={"detectable": detectable_shift(series[k], estimator)})
    return series, points


def _bounded(v: float) -> str:
    """A median as shown: ``2,650``, ``87.5``; never more than about ten digits (``1.2e+12``)."""
    if abs(v) >= 1e10:
        return f"{v:.3g}"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def change_text(point: DriftPoint) -> str:
    """``2,650 → 3,190 ms (+20.4%, worse)``."""
    fmt = _bounded

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


_WHAT = {"scenario": "scenario", "engine-version": "engine version", "image": "engine image"}
_WHERE = {-1: "one run before it", 0: "at this run", 1: "one run after it"}


def _short(value: str, what: str) -> str:
    return value[:12] if what == "scenario" else value


def cause_text(point: DriftPoint) -> str:
    """What the change point is attributed to: ``scenario changed at this run (a3fd0fb9e3d6 → 5c2e…)``, ``engine
    version changed one run before it (0.32.0 → 0.33.0)``, or ``drift: same scenario, engine version and image``."""
    if point.coincides:
        return "; ".join(f"{_WHAT[c.what]} changed {_WHERE.get(c.offset, 'near it')} "
                         f"({_short(c.before, c.what)} → {_short(c.after, c.what)})" for c in point.coincides)
    same = [name for name, before, after in (
        ("scenario", point.scenario_hash_before, point.scenario_hash_after),
        ("engine version", point.engine_version_before, point.engine_version_after),
        ("image", point.image_before, point.image_after)) if before and before == after]
    unknown = [name for name, before, after in (
        ("engine version", point.engine_version_before, point.engine_version_after),
        ("image", point.image_before, point.image_after)) if not (before and after)]
    text = "drift: same " + ", ".join(same) if same else "drift"
    return text + (f" ({' and '.join(unknown)} not recorded)" if unknown else "")


def measure_label(key: str) -> str:
    """``p99 TTFT`` for ``ttft_p99_ms`` (the key itself when unknown)."""
    return next((m.label for m in MEASURES if m.key == key), key)


def marker_label(point: DriftPoint) -> str:
    """The short label a trend chart puts on the change point's line."""
    label = f"{point.arm} {point.measure_label} ×{point.ratio:.2f}"
    return label + {"drift": "", "scenario-changed": " (scenario changed)", "engine-changed": " (engine changed)"}[
        point.cause]
