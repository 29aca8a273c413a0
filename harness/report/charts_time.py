"""Charts over time and by class: windowed p99 (and any other percentile a budget rule was judged at) with breached
windows, TTFT by hit class, and the runs trend.

The runs trend's value axis is set by the runs, not by one wild run: a point above the far-out fence of the
points' logarithms (:func:`off_scale_fence`) is drawn as an arrow at the top edge with its value beside it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from harness.core.svg import BREACH_COLOUR, SLO_COLOUR, arm_colour, chart_style, new_figure, short, to_svg
from harness.report import charts_ci
from harness.report.charts import Chart, load_label
from harness.schema.intervals import QuantileCI
from harness.schema.summary import ArmSummary, Summary

HIT_CLASS_COLOURS = {"mostly-cached": "#009E73", "partial": "#0072B2", "recomputed": "#D55E00"}
_OTHER_CLASS_COLOUR = "#999999"


def _breaches_metric(label: str, metric: str) -> bool:
    """Whether a breached rule label concerns this metric (labels naming neither TTFT nor ITL concern both)."""
    low = label.lower()
    names_one = "ttft" in low or "itl" in low
    return metric in low or not names_one


UNRESOLVED_COLOUR = "#8A5A00"
OTHER_PERCENTILE_STYLE = (0, (4, 2))


def other_percentiles(arm: ArmSummary, metric: str) -> list[float]:
    """The percentiles besides p99 the arm's windows carry for ``metric`` (those a budget rule was judged at)."""
    found = set()
    for w in arm.windows:
        for key in w.percentiles:
            name, _, pct = key.partition("_p")
            if name == metric and pct:
                found.add(float(pct))
    return sorted(found)


def _window_panel(ax: Axes, arm: ArmSummary, colour: str, metric: str, budget: float | None) -> bool:
    field = f"{metric}_p99_ms"
    pts = [(w.start_s, w.end_s, getattr(w, field), w.breached) for w in arm.windows]
    for w in arm.windows:
        if any(_breaches_metric(b, metric) for b in w.breached):
            ax.axvspan(w.start_s, w.end_s, color=BREACH_COLOUR, alpha=0.18, linewidth=0)
        elif any(_breaches_metric(u, metric) for u in w.unresolved):
            ax.axvspan(w.start_s, w.end_s, facecolor="none", edgecolor=UNRESOLVED_COLOUR, alpha=0.5,
                       hatch="///", linewidth=0)
    mids = [(w.start_s + w.end_s) / 2 for w in arm.windows]
    cis: list[QuantileCI | None] = [getattr(w, f"{metric}_p99_ci") for w in arm.windows]
    split = charts_ci.split(mids, [getattr(w, field) for w in arm.windows], cis)
    charts_ci.draw(ax, split, colour, linewidth=1.3, markersize=2.5, capsize=0.0)
    xs = split.line_x + split.least_x + split.most_x
    for pct in other_percentiles(arm, metric):
        at = [w.quantile(metric, pct) for w in arm.windows]
        other = charts_ci.split(mids, [a.value_ms if a else None for a in at], [a.ci if a else None for a in at])
        charts_ci.draw(ax, other, colour, linestyle=OTHER_PERCENTILE_STYLE, linewidth=1.0, markersize=2.0,
                       capsize=0.0)
        xs += other.line_x + other.least_x + other.most_x
    if xs:
        bx = [(s + e) / 2 for s, e, v, b in pts if v is not None and any(_breaches_metric(x, metric) for x in b)]
        by = [v for _, _, v, b in pts if v is not None and any(_breaches_metric(x, metric) for x in b)]
        if bx:
            ax.plot(bx, by, linestyle="none", marker="x", markersize=5, color=BREACH_COLOUR)
    if budget is not None:
        ax.axhline(budget, color=SLO_COLOUR, linestyle=(0, (6, 3)), linewidth=1.0)
    # Step boundaries: where a window starts a new step.
    previous = None
    for w in arm.windows:
        if previous is not None and w.step != previous:
            ax.axvline(w.start_s, color="#888888", linewidth=0.7, linestyle=":")
        previous = w.step
    ax.set_ylim(bottom=0)
    charts_ci.plain_ticks(ax)
    return bool(xs)


def windows_chart(summary: Summary) -> Chart:
    """Windowed p99 TTFT and ITL over each arm's run, breached windows shaded, SLO budgets drawn."""
    name = "windows"
    title = "Windowed p99 over time"
    caption = ("p99 TTFT (left) and ITL (right) in each rule window, per arm, against seconds since the arm's first "
               "step, with each window's confidence interval. Shaded windows with crosses breached a rule (the "
               "interval is above the budget); hatched windows could not be judged (unresolved: too few requests, "
               "or the interval straddles the budget), never a pass. An open triangle is a p99 the window can only "
               "bound from below. Dotted verticals are step boundaries; red dashed lines are the SLO p99 budgets.")
    arms = [a for a in summary.arms if a.windows]
    others = sorted({p for arm in arms for m in ("ttft", "itl") for p in other_percentiles(arm, m)})
    if others:
        named = "/".join(f"p{p:g}" for p in others)
        caption += f" Thinner dashed series: each window's {named}, the percentile a budget rule was judged at."
    if not arms:
        return Chart(name, title, caption, None, "No windows were recorded.")
    with chart_style(name):
        fig = new_figure(9.0, 0.8 + 1.75 * len(arms), top=0.6, hspace=0.55, wspace=0.18)
        axes = fig.subplots(len(arms), 2, sharex="row", squeeze=False)
        drawn = False
        for row, arm in enumerate(arms):
            colour = arm_colour(summary.arms.index(arm))
            for col, metric in enumerate(("ttft", "itl")):
                ax = axes[row][col]
                drawn |= _window_panel(ax, arm, colour, metric, summary.slo.get(f"{metric}_p99_ms"))
                pcts = "".join(f", p{p:g} dashed" for p in other_percentiles(arm, metric))
                ax.set_title(f"{short(arm.name, 28)}: p99{pcts} {metric.upper()} (ms)", fontsize=9, loc="left")
                if row == len(arms) - 1:
                    ax.set_xlabel("seconds since the arm started")
        if not drawn:
            return Chart(name, title, caption, None, "Windows were recorded but none had enough requests for a p99.")
        handles = [Patch(color=BREACH_COLOUR, alpha=0.3, label="breached window"),
                   Patch(facecolor="none", edgecolor=UNRESOLVED_COLOUR, hatch="///", label="unresolved window"),
                   Line2D([], [], color=SLO_COLOUR, linestyle="--", label="SLO p99 budget"),
                   *charts_ci.legend_handles(summary.statistics.confidence)[1:]]
        if others:
            handles.append(Line2D([], [], color="#444444", linestyle=OTHER_PERCENTILE_STYLE, linewidth=1.0,
                                  label="/".join(f"p{p:g}" for p in others) + " (a budget's percentile)"))
        fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1.0), ncol=len(handles), fontsize=7.5)
        return Chart(name, title, caption, to_svg(fig, name))


def hit_class_chart(summary: Summary) -> Chart:
    """TTFT p50 (bar) and p99 (whisker) by hit class, per arm and step."""
    name = "hit-class"
    title = "TTFT by hit class"
    caption = ("TTFT of requests grouped by how much of their prompt was cached (from per-request cached tokens): "
               "bars are p50, whiskers reach p99, per arm and step. An open triangle ends a whisker whose p99 the "
               "class's few requests cannot resolve: it reaches the p99's lower bound, the p99 is at least that.")
    arms = [a for a in summary.arms if any(s.ttft_by_hit_class for s in a.steps)]
    if not arms:
        return Chart(name, title, caption, None, "No per-request cached-token counts were reported.")
    classes: list[str] = []
    for arm in arms:
        for step in arm.steps:
            for item in step.ttft_by_hit_class:
                if item.hit_class not in classes:
                    classes.append(item.hit_class)
    width = 0.8 / max(1, len(classes))
    with chart_style(name):
        fig = new_figure(9.0, 3.2, wspace=0.08)
        axes = fig.subplots(1, len(arms), sharey=True, squeeze=False)[0]
        for ax, arm in zip(axes, arms, strict=True):
            for ci, cls in enumerate(classes):
                xs: list[float] = []
                p50s: list[float] = []
                p99s: list[float] = []
                open_top: list[bool] = []
                for si, step in enumerate(arm.steps):
                    found = next((h for h in step.ttft_by_hit_class if h.hit_class == cls), None)
                    if found is None or found.ttft_ms.p50 is None:
                        continue
                    xs.append(si + (ci - (len(classes) - 1) / 2) * width)
                    p50s.append(found.ttft_ms.p50)
                    top, unresolved = _p99_top(found.ttft_ms.p99, found.ttft_ms.p99_ci, found.ttft_ms.p50)
                    p99s.append(top)
                    open_top.append(unresolved)
                if not xs:
                    continue
                ax.bar(xs, p50s, width=width * 0.92, color=HIT_CLASS_COLOURS.get(cls, _OTHER_CLASS_COLOUR))
                ax.vlines(xs, p50s, p99s, color="#333333", linewidth=1.0)
                closed = [(x, y) for x, y, o in zip(xs, p99s, open_top, strict=True) if not o]
                opened = [(x, y) for x, y, o in zip(xs, p99s, open_top, strict=True) if o]
                if closed:
                    ax.plot(*zip(*closed, strict=True), linestyle="none", marker="_", color="#333333", markersize=6)
                if opened:
                    ax.plot(*zip(*opened, strict=True), linestyle="none", marker="^", markerfacecolor="white",
                            markeredgecolor="#333333", markersize=5)
            ax.set_xticks(range(len(arm.steps)), [short(s.label, 10) for s in arm.steps])
            charts_ci.plain_ticks(ax)
            ax.set_title(short(arm.name, 28), fontsize=9, loc="left")
            ax.set_xlabel(load_label(summary.arms))
            ax.grid(axis="x", visible=False)
        axes[0].set_ylabel("TTFT (ms)")
        handles = [Patch(color=HIT_CLASS_COLOURS.get(c, _OTHER_CLASS_COLOUR), label=short(c, 20)) for c in classes]
        axes[0].legend(handles=handles, loc="upper left", fontsize=7.5)
        return Chart(name, title, caption, to_svg(fig, name))


def _p99_top(p99: float | None, ci: QuantileCI | None, p50: float) -> tuple[float, bool]:
    """Where a p99 whisker ends and whether it is open (unresolved: the lower bound, not the value)."""
    if ci is not None and not ci.resolved:
        return (ci.lo if ci.lo is not None else p50), True
    return (p99 if p99 is not None else p50), False


@dataclass(frozen=True)
class TrendSeries:
    """p99 TTFT of one arm across runs of one scenario (None where the run lacks the arm or the figure)."""

    arm: str
    values: list[float | None]
    cis: list[QuantileCI | None] | None = None  # the values' intervals (None: not recorded)


@dataclass(frozen=True)
class TrendMarker:
    """A change point on the trend: a vertical line just before run ``x`` (0 = oldest), in ``series``' colour."""

    x: int
    series: int  # index into the chart's series (its colour); -1: grey
    label: str


MARKER_STYLE = (0, (3, 2))


def _markers(ax: Axes, markers: Sequence[TrendMarker], runs: int) -> None:
    stacked: dict[int, int] = {}
    for m in markers:
        if not 0 < m.x < runs:
            continue
        colour = arm_colour(m.series) if m.series >= 0 else "#666666"
        ax.axvline(m.x - 0.5, color=colour, linestyle=MARKER_STYLE, linewidth=1.1)
        row = stacked.get(m.x, 0)
        stacked[m.x] = row + 1
        ax.text(m.x - 0.45 + 0.3 * row, 0.98, short(m.label, 40), transform=ax.get_xaxis_transform(), rotation=90,
                ha="left", va="top", fontsize=6.5, color=colour,
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.75, "pad": 0.6})


OFF_SCALE_IQRS = 3.0  # Tukey's far-out fence, on the logarithms of the plotted p99s
MIN_LOG_IQR = math.log(2.0)  # the spread the fence assumes at least: a run within 8x of the upper quartile is drawn


def off_scale_fence(values: Sequence[float]) -> float | None:
    """The value above which a trend point is off the scale (None: too few points to tell, or none are positive)."""
    logs = np.log(np.asarray([v for v in values if math.isfinite(v) and v > 0], dtype=np.float64))
    if len(logs) < 4:
        return None
    q25, q75 = np.quantile(logs, [0.25, 0.75])
    return float(np.exp(q75 + OFF_SCALE_IQRS * max(float(q75 - q25), MIN_LOG_IQR)))


def _tick_number(value: float) -> str:
    return f"{value:,.0f}" if abs(value) < 1e9 else f"{value:.3g}"


def _finite(values: Sequence[float | None]) -> list[float | None]:
    return [v if v is not None and math.isfinite(v) else None for v in values]


def _off_scale(ax: Axes, series: Sequence[TrendSeries], fence: float | None, drawn: Sequence[float]) -> bool:
    """Set the top of the axis from the points under ``fence``; mark those above it at the top edge."""
    inside = [v for v in drawn if math.isfinite(v) and (fence is None or v <= fence)]
    if fence is None or not inside or max(drawn, default=0.0) <= fence:
        return False
    top = max(inside) * 1.12
    ax.set_ylim(bottom=0, top=top)
    for i, s in enumerate(series):
        for x, v in enumerate(_finite(s.values)):
            if v is not None and v > fence:
                ax.plot([x], [top], linestyle="none", marker="^", markersize=7, color=arm_colour(i), clip_on=False)
                ax.annotate(f"{_tick_number(v)} ms", (x, top), xytext=(4, -9), textcoords="offset points",
                            fontsize=6.5, color=arm_colour(i), annotation_clip=False)
    return True


def trend_chart(name: str, title: str, run_labels: Sequence[str], series: Sequence[TrendSeries],
                markers: Sequence[TrendMarker] = ()) -> Chart:
    """p99 TTFT per arm across runs (oldest left), for the results index; ``markers``: change points found."""
    caption = ("p99 TTFT at each arm's highest load step, per run of this scenario (oldest left), with its "
               "confidence interval; an open triangle is a p99 the step could only bound from below (at least). "
               "A gap means the run lacks that arm or the figure.")
    if markers:
        caption += (" Dashed verticals mark change points in this scenario's history (in the arm's colour, before "
                    "the first run at the new level; label: arm, measure and after/before ratio), listed below.")
    series = [TrendSeries(arm=s.arm, values=_finite(s.values), cis=_finite_cis(s)) for s in series]
    if not run_labels or not any(v is not None for s in series for v in s.values):
        return Chart(name, title, caption, None, "No run has a p99 TTFT to plot.")
    with chart_style(name):
        fig = new_figure(max(6.0, min(14.0, 0.35 * len(run_labels) + 3.0)), 3.4, bottom=1.0, top=0.2)
        ax = fig.add_subplot()
        drawn: list[float] = []
        for i, s in enumerate(series):
            cis = s.cis if s.cis is not None and len(s.cis) == len(s.values) else [None] * len(s.values)
            pts = charts_ci.split([float(x) for x in range(len(s.values))], s.values, cis)
            charts_ci.draw(ax, pts, arm_colour(i))
            drawn.extend(pts.values())
            ax.plot([], [], color=arm_colour(i), marker="o", markersize=3.5, linewidth=1.4, label=short(s.arm, 24))
        fence = off_scale_fence([v for s in series for v in s.values if v is not None])
        if _off_scale(ax, series, fence, drawn):
            caption += (" An arrow at the top edge is a run off the scale, its p99 printed beside it: the axis is set "
                        "by the other runs.")
        _markers(ax, markers, len(run_labels))
        step = max(1, len(run_labels) // 12)
        ticks = list(range(0, len(run_labels), step))
        ax.set_xticks(ticks, [short(run_labels[t], 16) for t in ticks], rotation=30, ha="right", fontsize=7.5)
        ax.set_ylabel("p99 TTFT (ms)")
        ax.set_ylim(bottom=0)
        charts_ci.plain_ticks(ax)
        ax.legend(loc="upper left", fontsize=7.5)
        return Chart(name, title, caption, to_svg(fig, name))


def _finite_cis(s: TrendSeries) -> list[QuantileCI | None] | None:
    """The series' intervals, an interval with an end that is not finite dropped."""
    if s.cis is None:
        return None
    return [None if ci is not None and any(e is not None and not math.isfinite(e) for e in (ci.lo, ci.hi)) else ci
            for ci in s.cis]
