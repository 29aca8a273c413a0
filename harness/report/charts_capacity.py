"""The capacity-at-SLO chart: every probe's percentile with its interval against load, per arm, the budget line and
each arm's capacity (``summary.capacity``, from ``steps.search``)."""

from __future__ import annotations

from matplotlib.lines import Line2D

from harness.core.svg import SLO_COLOUR, arm_colour, chart_style, new_figure, short, to_svg
from harness.report import charts_ci
from harness.report.charts import Chart
from harness.schema.capacity import CapacityProbe
from harness.schema.summary import Summary

_OUTCOME_MARKERS = {"meets": "o", "breaks": "X", "unresolved": "D"}


def _counted(probes: list[CapacityProbe]) -> list[CapacityProbe]:
    """The probe that counts at each load (a longer re-run replaces the probe it extends), by load."""
    last = {p.load: p for p in probes}
    return sorted(last.values(), key=lambda p: p.load)


def capacity_chart(summary: Summary) -> Chart:
    """Probes against load; a vertical dotted line at each arm's capacity."""
    name = "capacity"
    cap = summary.capacity
    title = "Capacity at SLO: the search's probes"
    if cap is None:
        return Chart(name, title, "", None, "No capacity search in this scenario.")
    caption = (f"Each probe's p{cap.percentile:g} {cap.metric.upper()} with its {cap.confidence:.0%} interval, per "
               "arm: a dot met the budget (the whole interval within it), a cross broke it (the whole interval "
               "above, or too many errors), a diamond could not tell; an open triangle is a percentile the probe "
               "could not bound from above. Where a load was probed twice (an unresolved probe re-run longer), the "
               "re-run is drawn. The red dashed line is the budget; a dotted vertical line is an arm's capacity.")
    with chart_style(name):
        fig = new_figure(7.5, 3.6, bottom=0.95)
        ax = fig.subplots()
        drawn = 0
        values: list[float] = [cap.budget_ms]
        for i, arm in enumerate(cap.arms):
            colour = arm_colour(i)
            probes = _counted(arm.probes)
            pts = charts_ci.split([p.load for p in probes], [p.value_ms for p in probes], [p.ci for p in probes])
            charts_ci.draw(ax, pts, colour, linewidth=1.2, marker=None)
            for probe in probes:
                if probe.value_ms is not None and probe.ci is not None and probe.ci.resolved:
                    ax.plot([probe.load], [probe.value_ms], linestyle="none", color=colour,
                            marker=_OUTCOME_MARKERS[probe.outcome], markersize=6)
            drawn += pts.drawn
            values += pts.values()
            if arm.capacity is not None:
                ax.axvline(arm.capacity, color=colour, linestyle=":", linewidth=1.4)
        if not drawn:
            return Chart(name, title, caption, None, "No probe has latency samples.")
        ax.axhline(cap.budget_ms, color=SLO_COLOUR, linestyle=(0, (6, 3)), linewidth=1.2)
        ax.annotate(f"budget {cap.budget_ms:g} ms", xy=(1.0, cap.budget_ms), xycoords=("axes fraction", "data"),
                    ha="right", va="bottom", fontsize=8, color=SLO_COLOUR)
        positive = [v for v in values if v > 0]
        if positive and max(positive) / min(positive) > 30:
            ax.set_yscale("log")
        charts_ci.plain_ticks(ax)
        ax.set_xlabel("concurrency (users)" if cap.kind == "concurrency" else "offered load (requests/s)")
        ax.set_ylabel(f"p{cap.percentile:g} {cap.metric.upper()} (ms)")
        handles = [Line2D([], [], color=arm_colour(i), linewidth=2, label=short(a.arm, 24))
                   for i, a in enumerate(cap.arms)]
        handles += [Line2D([], [], color="#444444", marker=m, linestyle="none", label=o)
                    for o, m in _OUTCOME_MARKERS.items()]
        fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.0), ncol=min(8, len(handles)),
                   fontsize=8)
        return Chart(name, title, caption, to_svg(fig, name))
