"""The forest plot at the top of report.html: every deciding comparison as an interval on one log-ratio axis.

Rows are ``ArmSummary.effects`` (the comparisons the rules made), read by :mod:`harness.report.forest_rows`;
nothing is recomputed. Each row shows its interval, its limit (and a harm row's "within" limit), the 1x line, and
its outcome as colour (with a legend) and as text. An unresolved interval is drawn dashed over what its bounds
allow, never as a point; a bound that is missing, infinite or beyond the axis is clipped at the axis edge with an
arrow. The SVG is built by hand (:mod:`harness.report.forest_draw`) rather than with matplotlib: the layout is a
fixed grid whose labels are sized and truncated to their columns, every row carries a ``<title>`` tooltip and the
figure an accessible name, and it is a few kilobytes drawn in a millisecond. The page also carries the plot as
text (:attr:`ForestPlot.lines`, the effect table's lines).
"""

from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup

from harness.report.effects import effect_lines
from harness.report.forest_draw import draw
from harness.report.forest_rows import OUTCOME_COLOURS, axis_span, forest_blocks, outcome_colour
from harness.schema.summary import Summary

__all__ = ["ForestPlot", "forest_plot"]


@dataclass(frozen=True)
class ForestPlot:
    """What forest.html.j2 shows: the SVG, its legend (outcomes present, in legend order) and the text fallback."""

    svg: Markup
    legend: list[tuple[str, str]]  # (outcome, colour)
    lines: list[str]
    rows: int
    dashed: bool = False  # some interval is unresolved (legend: dashed)
    clipped: bool = False  # something lies beyond the axis (legend: arrow)


def forest_plot(summary: Summary) -> ForestPlot | None:
    """The plot, or None when no arm has a deciding comparison (no tier arm, or none was compared)."""
    blocks = forest_blocks(summary)
    if not blocks:
        return None
    rows = [r for b in blocks for r in b.rows]
    present = {r.outcome for r in rows}
    legend = [(o, c) for o, c in OUTCOME_COLOURS.items() if o in present]
    legend += sorted((o, outcome_colour(o)) for o in present if o not in OUTCOME_COLOURS)
    usual = summary.statistics.confidence
    lines = [f"{arm.name}: {line}" for arm in summary.arms for line in effect_lines(arm, usual)]
    span = axis_span([e for arm in summary.arms for e in arm.effects])
    svg = draw(blocks, span)
    return ForestPlot(svg=svg, legend=legend, lines=lines, rows=len(rows), dashed='class="ci unres' in svg,
                      clipped='class="clip' in svg)
