"""``report.html``: the self-contained page a reviewer reads (verdict, effect sizes and break-even, fit screen, arms,
charts, drills, launch)."""

from __future__ import annotations

from pathlib import Path

from harness.report.charts import Chart, hit_quality_chart, latency_chart, throughput_chart
from harness.report.charts_capacity import capacity_chart
from harness.report.charts_time import hit_class_chart, windows_chart
from harness.report.fmt import verdict_title
from harness.report.forest import forest_plot
from harness.report.headline import headline
from harness.report.links import raw_links
from harness.report.templating import html_env, slug
from harness.schema.summary import Summary

__all__ = ["build_charts", "render_html", "verdict_title"]


def build_charts(summary: Summary) -> list[Chart]:
    """Every chart of the report, in page order."""
    charts = [latency_chart(summary), hit_quality_chart(summary), windows_chart(summary), throughput_chart(summary),
              hit_class_chart(summary)]
    return [*charts, capacity_chart(summary)] if summary.capacity is not None else charts


def render_html(summary: Summary, run_dir: Path | None = None) -> str:
    """The report page as text (``run_dir`` only decides which raw-file links exist)."""
    template = html_env().get_template("report.html.j2")
    arm_ids = [f"arm-{i}-{slug(arm.name)}" for i, arm in enumerate(summary.arms)]
    return template.render(s=summary, verdict_title=verdict_title(summary), headline=headline(summary),
                           charts=build_charts(summary), links=raw_links(summary, run_dir), arm_ids=arm_ids,
                           forest=forest_plot(summary))
