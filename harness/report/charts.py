"""Charts against load: TTFT/ITL percentiles with SLO lines, throughput, and hit quality by tier.

Every function takes the :class:`~harness.schema.summary.Summary` and returns a :class:`Chart`; a chart with no data has
``svg=None`` and a note saying what was missing (a missing value is a gap, never a 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.typing import LineStyleType

from harness.core.svg import HIT_COLOURS, SLO_COLOUR, arm_colour, chart_style, new_figure, short, to_svg
from harness.report import charts_ci
from harness.schema.summary import ArmSummary, StepSummary, Summary


@dataclass(frozen=True)
class Chart:
    """One rendered chart (``svg`` is None when there was nothing to draw; ``note`` says why)."""

    name: str
    title: str
    caption: str
    svg: Markup | None
    note: str | None = None


_PCT_STYLES: tuple[tuple[str, LineStyleType, float], ...] = (("p50", ":", 0.9), ("p95", "--", 1.1),
                                                              ("p99", "-", 1.6))
HIT_SOURCES = (("gpu", "GPU"), ("cpu", "CPU"), ("disk", "disk"), ("miss", "recomputed"))


def load_label(arms: Sequence[ArmSummary]) -> str:
    """The x-axis label: concurrency for closed-loop steps, offered rate for open-loop ones."""
    steps = [s for arm in arms for s in arm.steps]
    if steps and all(s.concurrency is not None for s in steps):
        return "concurrency (users)"
    if steps and all(s.rate_rps is not None for s in steps):
        return "offered load (requests/s)"
    return "step"


def load_value(step: StepSummary) -> float:
    """The step's position on the load axis."""
    if step.concurrency is not None:
        return float(step.concurrency)
    if step.rate_rps is not None:
        return float(step.rate_rps)
    return float(step.index)


def _points(arm: ArmSummary, values: Sequence[float | None]) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for step, value in zip(arm.steps, values, strict=True):
        if value is not None:
            xs.append(load_value(step))
            ys.append(value)
    return xs, ys


def _maybe_log(ax: Axes, values: Sequence[float]) -> None:
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > 30:
        ax.set_yscale("log")


def _dodge(summary: Summary) -> float:
    """How far apart arms are drawn on the load axis so their error bars do not overlap."""
    xs = [load_value(s) for arm in summary.arms for s in arm.steps]
    span = (max(xs) - min(xs)) if xs else 0.0
    return 0.012 * span if span > 0 else 0.04


def _latency_panel(ax: Axes, summary: Summary, metric: str) -> int:
    drawn = 0
    all_values: list[float] = []
    dodge = _dodge(summary)
    for i, arm in enumerate(summary.arms):
        offset = (i - (len(summary.arms) - 1) / 2) * dodge
        xs = [load_value(s) + offset for s in arm.steps]
        for pct, style, width in _PCT_STYLES:
            figures = [getattr(s, f"{metric}_ms") for s in arm.steps]
            pts = charts_ci.split(xs, [getattr(f, pct) for f in figures], [f.ci(pct) for f in figures])
            charts_ci.draw(ax, pts, arm_colour(i), linestyle=style, linewidth=width,
                           marker="o" if pct == "p99" else None, capsize=2.5 if pct == "p99" else 0.0)
            drawn += pts.drawn
            all_values.extend(pts.values())
    budget = summary.slo.get(f"{metric}_p99_ms")
    if budget is not None:
        ax.axhline(budget, color=SLO_COLOUR, linestyle=(0, (6, 3)), linewidth=1.2)
        ax.annotate(f"p99 budget {budget:g} ms", xy=(1.0, budget), xycoords=("axes fraction", "data"),
                    ha="right", va="bottom", fontsize=8, color=SLO_COLOUR)
        all_values.append(budget)
    _maybe_log(ax, all_values)
    charts_ci.plain_ticks(ax)
    ax.set_title(f"{metric.upper()} (ms)")
    ax.set_xlabel(load_label(summary.arms))
    return drawn


def _arm_legend(ax: Axes, arms: Sequence[ArmSummary], extra: Sequence[Line2D] = ()) -> None:
    handles = [Line2D([], [], color=arm_colour(i), linewidth=2, label=short(a.name, 24)) for i, a in enumerate(arms)]
    ax.legend(handles=[*handles, *extra], loc="upper left", fontsize=8)


def latency_chart(summary: Summary) -> Chart:
    """p50/p95/p99 TTFT and ITL against load, one colour per arm, with the SLO p99 budgets."""
    name = "latency"
    title = "TTFT and ITL percentiles against load"
    caption = ("Client-measured percentiles per arm and step: dotted p50, dashed p95, solid p99 with points; "
               "error bars are each percentile's confidence interval. An open triangle is a percentile the step's "
               "sample cannot bound from above: it is at least that high (too few requests to resolve it). Red "
               "dashed lines are the SLO p99 budgets. A missing point means no samples at that step.")
    with chart_style(name):
        fig = new_figure(9.0, 4.1, wspace=0.18, bottom=1.05)
        ax_ttft, ax_itl = fig.subplots(1, 2)
        drawn = _latency_panel(ax_ttft, summary, "ttft") + _latency_panel(ax_itl, summary, "itl")
        if not drawn:
            return Chart(name, title, caption, None, "No step has latency samples.")
        pct_handles = [Line2D([], [], color="#444444", linestyle=style, linewidth=width, label=pct)
                       for pct, style, width in _PCT_STYLES]
        arm_handles = [Line2D([], [], color=arm_colour(i), linewidth=2, label=short(a.name, 24))
                       for i, a in enumerate(summary.arms)]
        fig.legend(handles=[*arm_handles, *pct_handles, *charts_ci.legend_handles(summary.statistics.confidence)],
                   loc="lower center", bbox_to_anchor=(0.5, 0.0), ncol=min(8, len(arm_handles) + 5), fontsize=8)
        return Chart(name, title, caption, to_svg(fig, name))


def throughput_chart(summary: Summary) -> Chart:
    """Output tokens per second against load, one line per arm."""
    name = "throughput"
    title = "Throughput against load"
    caption = "Output tokens per second over each step, per arm. A gap means the figure is missing for that step."
    with chart_style(name):
        fig = new_figure(6.0, 3.2)
        ax = fig.add_subplot()
        drawn = 0
        for i, arm in enumerate(summary.arms):
            xs, ys = _points(arm, [s.output_tokens_per_s for s in arm.steps])
            if xs:
                ax.plot(xs, ys, color=arm_colour(i), marker="o", markersize=4, linewidth=1.6)
                drawn += len(xs)
        if not drawn:
            return Chart(name, title, caption, None, "No step has an output-token rate.")
        ax.set_xlabel(load_label(summary.arms))
        ax.set_ylabel("output tokens/s")
        ax.set_ylim(bottom=0)
        charts_ci.plain_ticks(ax)
        _arm_legend(ax, summary.arms)
        return Chart(name, title, caption, to_svg(fig, name))


def hit_shares(step: StepSummary) -> dict[str, float] | None:
    """Share of prompt tokens by source for one step, or None when any source is missing or nothing was counted."""
    hits = step.hit_tokens
    values = {key: getattr(hits, key) for key, _ in HIT_SOURCES}
    if any(v is None for v in values.values()):
        return None
    total = sum(int(v) for v in values.values())
    if total <= 0:
        return None
    return {key: int(v) / total for key, v in values.items()}


def hit_quality_chart(summary: Summary) -> Chart:
    """Stacked bars per arm and step: the share of prompt tokens served by GPU, CPU, disk, or recomputed."""
    name = "hit-quality"
    title = "Hit quality by tier"
    caption = ("Share of prompt tokens per arm and step by where their KV came from: GPU prefix cache, CPU tier, "
               "disk tier, or recomputed (miss). Token counts are in the arm tables. 'missing' marks a step whose "
               "server did not expose the hit series.")
    bars = [(arm, step) for arm in summary.arms for step in arm.steps]
    if not bars:
        return Chart(name, title, caption, None, "No steps were run.")
    positions: list[float] = []
    labels: list[str] = []
    stacks: dict[str, tuple[list[float], list[float], list[float]]] = {k: ([], [], []) for k, _ in HIT_SOURCES}
    missing_at: list[float] = []
    separators: list[float] = []
    x = 0.0
    for i, arm in enumerate(summary.arms):
        for step in arm.steps:
            shares = hit_shares(step)
            if shares is None:
                missing_at.append(x)
            else:
                bottom = 0.0
                for key, _ in HIT_SOURCES:
                    xs, bottoms, heights = stacks[key]
                    xs.append(x)
                    bottoms.append(bottom * 100)
                    heights.append(shares[key] * 100)
                    bottom += shares[key]
            positions.append(x)
            labels.append(f"{short(arm.name, 14)}\n{short(step.label, 10)}")
            x += 1.0
        if i < len(summary.arms) - 1:
            separators.append(x - 0.25)
            x += 0.5
    if not stacks["gpu"][0]:
        return Chart(name, title, caption, None, "No step exposed all hit sources (see missing metrics).")
    with chart_style(name):
        fig = new_figure(max(6.0, min(14.0, 0.55 * len(bars) + 2.0)), 3.8, bottom=0.6, top=0.45)
        ax = fig.add_subplot()
        for key, _ in HIT_SOURCES:
            xs, bottoms, heights = stacks[key]
            ax.bar(xs, heights, bottom=bottoms, width=0.8, color=HIT_COLOURS[key], edgecolor="white", linewidth=0.5)
        for mx in missing_at:
            ax.text(mx, 50, "missing", rotation=90, ha="center", va="center", fontsize=8, color="#666666")
        for sx in separators:
            ax.axvline(sx, color="#999999", linewidth=0.8)
        ax.set_xticks(positions, labels, fontsize=7.5)
        ax.set_xlim(-0.6, x - 0.4)
        ax.set_ylim(0, 100)
        ax.set_ylabel("% of prompt tokens")
        ax.grid(axis="x", visible=False)
        handles = [Line2D([], [], color=HIT_COLOURS[k], linewidth=8, label=label) for k, label in HIT_SOURCES]
        ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=4, fontsize=8)
        return Chart(name, title, caption, to_svg(fig, name))
