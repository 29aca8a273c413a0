"""``results/index.html``, ``index.json`` and ``drift.md``: every run with its verdict, date, scenario and engine, a
trend of p99 TTFT per arm across the runs of each scenario (for scheduled CI), and the change points of each
scenario's history per arm and deciding measure (:mod:`harness.report.drift`): marked on the trend, listed in the
page, carried in ``index.json`` under ``drift``, and written as Markdown to ``drift.md`` for a CI job summary.

Only the immediate sub-folders of the results folder that hold a ``summary.json`` are runs; one whose summary
cannot be read (corrupt, nested too deep, not a regular file, holding NaN or Infinity, or anything else that goes
wrong with it) is listed as unreadable with the reason instead of stopping the index. A figure that cannot be a
measurement (:mod:`harness.report.index_figures`) is dropped from the trend and the drift test and listed with its
run as invalid. ``index.json`` is strict JSON (no bare NaN or Infinity, whatever a run holds).
:func:`refresh_index`, called at the end of every ``harness run``, never raises: a failure there is a warning and
never changes the run's exit code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from harness.core.boundary import short_message
from harness.report.charts import Chart
from harness.report.charts_time import TrendMarker, TrendSeries, trend_chart
from harness.report.drift import (
    DriftPoint,
    DriftReport,
    DriftSeries,
    cause_text,
    change_text,
    engine_image,
    image_text,
    marker_label,
    measure_label,
    p_text,
    scenario_drift,
    step_measures,
    top_steps,
)
from harness.report.drift_causes import engine_version
from harness.report.drift_power import detectable_text
from harness.report.fmt import top_step
from harness.report.index_figures import InvalidFigure, checked, checked_ci, invalid_text
from harness.report.links import safe_href
from harness.report.load import ReportInputError, load_summary_file
from harness.report.templating import html_env, md_env, slug
from harness.report.writers import html_safe_json, write_files
from harness.rundir.layout import REPORT_HTML, RunDir
from harness.schema.intervals import QuantileCI
from harness.schema.summary import Summary
from harness.stats.detectability import Estimator

MAX_RUNS = 2000        # runs listed (newest first); older ones are counted, not listed
MAX_TREND_RUNS = 60    # runs per scenario in a trend chart (newest)
MAX_REASON = 400       # characters of an unreadable run's reason kept in the index
_DRIFT_TEXT = {"change_text": change_text, "p_text": p_text, "image_text": image_text, "cause_text": cause_text,
              "detectable_text": detectable_text, "invalid_text": invalid_text, "measure_label": measure_label}


class IndexEntry(BaseModel):
    """One run in the index."""

    model_config = ConfigDict(extra="forbid")
    run_dir: str
    href: str | None
    ok: bool
    error: str | None = None
    run_id: str | None = None
    started_at: str | None = None
    scenario: str | None = None
    engine: str | None = None
    model: str | None = None
    simulated: bool | None = None
    verdict: str | None = None
    recommended_arm: str | None = None
    ttft_p99_ms: dict[str, float | None] = Field(default_factory=dict)  # per arm, at its highest-load step
    ttft_p99_ci: dict[str, QuantileCI | None] = Field(default_factory=dict)  # the same figures' intervals and n
    ttft_p99_count: dict[str, int] = Field(default_factory=dict)  # requests behind each figure
    image: str | None = None  # the engine image (tag@digest where recorded)
    top_step: dict[str, str] = Field(default_factory=dict)  # per arm, the label of its highest-load step
    step_measures: dict[str, dict[str, dict[str, float | None]]] = Field(default_factory=dict)  # arm/step/measure
    scenario_hash: str | None = None
    engine_version: str | None = None  # the engine's own check's, else the installed package's (sim: the harness)
    invalid: list[InvalidFigure] = Field(default_factory=list)  # figures refused: not finite, or beyond measuring


@dataclass(frozen=True)
class ScenarioTrend:
    """The trend chart of one scenario."""

    scenario: str
    runs: int
    chart: Chart
    drift: list[DriftPoint] = field(default_factory=list)  # change points found in the charted runs
    drift_series: list[DriftSeries] = field(default_factory=list)  # every history looked at


def _unreadable(run_dir: Path, reason: str) -> IndexEntry:
    if len(reason) > MAX_REASON:
        reason = reason[:MAX_REASON] + "..."
    return IndexEntry(run_dir=run_dir.name, href=None, ok=False, error=reason)


def _entry(run_dir: Path) -> IndexEntry:
    files = RunDir(run_dir)
    href = safe_href(f"{run_dir.name}/{REPORT_HTML}")
    try:
        summary = load_summary_file(files.summary_json)
        return _from_summary(run_dir, summary, href if files.report_html.is_file() else None)
    except ReportInputError as exc:
        return _unreadable(run_dir, str(exc))
    except Exception as exc:  # one odd run must not stop the index of all the others
        return _unreadable(run_dir, f"{run_dir / 'summary.json'}: cannot be listed: {short_message(exc)}")


def _from_summary(run_dir: Path, s: Summary, href: str | None) -> IndexEntry:
    trend: dict[str, float | None] = {}
    cis: dict[str, QuantileCI | None] = {}
    counts: dict[str, int] = {}
    invalid: list[InvalidFigure] = []
    for arm in s.arms:
        top = top_step(arm)
        trend[arm.name] = checked(arm.name, top.label, "ttft_p99_ms", top.ttft_ms.p99, invalid) if top else None
        cis[arm.name] = checked_ci(arm.name, top.label, top.ttft_ms.p99_ci, invalid) if top else None
        counts[arm.name] = top.ttft_ms.count if top is not None else 0
    measures = step_measures(s, invalid)
    unique = list({(f.arm, f.step, f.measure): f for f in invalid}.values())
    return IndexEntry(run_dir=run_dir.name, href=href, ok=True, run_id=s.run_id, started_at=s.started_at,
                      scenario=s.scenario, engine=s.engine, model=s.model, simulated=s.simulated, verdict=s.verdict,
                      recommended_arm=s.recommended_arm, ttft_p99_ms=trend, ttft_p99_ci=cis, ttft_p99_count=counts,
                      image=engine_image(s), top_step=top_steps(s), step_measures=measures,
                      scenario_hash=s.scenario_hash, engine_version=engine_version(s), invalid=unique)


def scan_runs(results_dir: Path) -> tuple[list[IndexEntry], int]:
    """Runs under ``results_dir`` newest first (at most :data:`MAX_RUNS`), and how many were left out."""
    if not results_dir.is_dir():
        raise ReportInputError(f"{results_dir}: not a directory (give the results folder, e.g. results/)")
    try:
        candidates = sorted((p for p in results_dir.iterdir() if _is_run(p)), key=lambda p: p.name, reverse=True)
    except OSError as exc:
        raise ReportInputError(f"{results_dir}: cannot list it ({exc.strerror or exc})") from None
    entries = [_entry(p) for p in candidates[:MAX_RUNS]]
    entries.sort(key=lambda e: (e.started_at or "", e.run_dir), reverse=True)
    return entries, max(0, len(candidates) - MAX_RUNS)


def _is_run(path: Path) -> bool:
    try:
        summary = RunDir(path).summary_json
        return path.is_dir() and (summary.exists() or summary.is_symlink())
    except OSError:  # a folder the harness may not look into is not listed
        return False


def scenario_trends(entries: list[IndexEntry], estimator: Estimator | None = None) -> list[ScenarioTrend]:
    """One p99 TTFT trend per scenario, oldest run left, arms in first-seen order, change points marked; with an
    ``estimator``, each tested history's detectable shift (:mod:`harness.report.drift_power`)."""
    by_scenario: dict[str, list[IndexEntry]] = {}
    for e in entries:
        if e.ok and e.scenario is not None:
            by_scenario.setdefault(e.scenario, []).append(e)
    trends: list[ScenarioTrend] = []
    for n, (scenario, newest_first) in enumerate(sorted(by_scenario.items())):
        runs = list(reversed(newest_first[:MAX_TREND_RUNS]))  # oldest first
        arms: list[str] = []
        for e in runs:
            arms.extend(a for a in e.ttft_p99_ms if a not in arms)
        series = [TrendSeries(arm=a, values=[e.ttft_p99_ms.get(a) for e in runs],
                              cis=[e.ttft_p99_ci.get(a) for e in runs]) for a in arms]
        labels = [(e.started_at or e.run_dir)[:16] for e in runs]
        drift_series, drift = _drift(scenario, runs, estimator)
        markers = [TrendMarker(x=p.run_index, series=arms.index(p.arm) if p.arm in arms else -1,
                               label=marker_label(p)) for p in drift]
        chart = trend_chart(f"trend-{n}-{slug(scenario)}", f"p99 TTFT per arm: {scenario}", labels, series, markers)
        trends.append(ScenarioTrend(scenario=scenario, runs=len(runs), chart=chart, drift=drift,
                                    drift_series=drift_series))
    return trends


def _drift(scenario: str, runs: list[IndexEntry],
           estimator: Estimator | None) -> tuple[list[DriftSeries], list[DriftPoint]]:
    try:
        return scenario_drift(scenario, runs, estimator)
    except Exception as exc:  # drift is a by-product: the index goes on without it
        note = f"drift not computed: {short_message(exc)}"
        return [DriftSeries(scenario=scenario, engine=None, model=None, arm="", measure="", step="", runs=len(runs),
                            tested=False, note=note)], []


def drift_report(trends: list[ScenarioTrend]) -> DriftReport:
    """The change points and histories of every scenario, for index.json and drift.md."""
    return DriftReport(max_runs=MAX_TREND_RUNS, points=[p for t in trends for p in t.drift],
                       series=[s for t in trends for s in t.drift_series])


def drift_markdown(report: DriftReport) -> str:
    """``drift.md``: the change points as a Markdown table (for a CI job summary)."""
    return md_env().get_template("index_drift.md.j2").render(report=report, **_DRIFT_TEXT)


def write_index(results_dir: Path) -> dict[str, Path]:
    """Write ``index.html``, ``index.json`` and ``drift.md`` into ``results_dir``; returns name -> path."""
    entries, left_out = scan_runs(results_dir)
    trends = scenario_trends(entries, Estimator())
    drift = drift_report(trends)
    hrefs = {e.run_dir: e.href for e in entries if e.href}
    html = html_env().get_template("index.html.j2").render(entries=entries, trends=trends, left_out=left_out,
                                                           drift=drift, hrefs=hrefs, **_DRIFT_TEXT)
    text = index_json_text(entries, left_out, drift)
    markdown = drift_markdown(drift)
    return write_files({"html": (results_dir / "index.html", lambda: html),
                        "json": (results_dir / "index.json", lambda: text),
                        "drift": (results_dir / "drift.md", lambda: markdown)})


def index_json_text(entries: list[IndexEntry], left_out: int, drift: DriftReport) -> str:
    """``index.json``: strict JSON (a non-finite float that slipped through is written as null, never as a bare
    ``NaN``), with ``<``, ``>``, ``&`` escaped."""
    data = {"runs": [json.loads(e.model_dump_json()) for e in entries], "left_out": left_out,
            "drift": json.loads(drift.model_dump_json())}  # pydantic writes a non-finite float as null
    return html_safe_json(json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)) + "\n"


def refresh_index(results_dir: Path) -> str | None:
    """Rebuild the results index after a run; returns why it could not be rebuilt (None when it was).

    Never raises (but for KeyboardInterrupt/SystemExit): the index is a by-product of a run, and a corrupt
    sibling run or a full disk must not change the run's outcome."""
    try:
        write_index(results_dir)
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename is not None else ""
        return f"the results index in {results_dir} was not rebuilt ({exc.strerror or exc}{where})"
    except Exception as exc:
        return f"the results index in {results_dir} was not rebuilt ({short_message(exc)})"
    return None
