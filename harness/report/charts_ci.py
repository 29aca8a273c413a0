"""Drawing percentiles with their intervals, and plain tick labels.

* A resolved percentile is a point with an error bar from its interval's ends.
* One bounded from below only ("at least", a p99 from too few requests) is an open upward triangle at the lower
  bound, with no line through it: it is not a value to read off. "At most" is an open downward triangle.
* A percentile recorded without an interval is a plain point; one with neither bound is a gap.

Tick labels are plain numbers (``1,000``): matplotlib's log-axis formatter writes TeX (``$\\mathdefault{10^{3}}$``)
that, with maths parsing off and text kept as SVG ``<text>``, would be printed raw.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from harness.schema.intervals import QuantileCI


def plain_number(value: float, _pos: object = None) -> str:
    """A tick label without TeX: ``1,000``, ``2.5``, ``0.05``."""
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.6g}"


def plain_ticks(ax: Axes) -> None:
    """Plain-number tick labels on the value (y) axis; a log axis gets 1-2-5 ticks, labelled, and no minor labels.

    Only y: the x axes of these charts are linear or categorical (labels set by the chart)."""
    if ax.get_yscale() == "log":
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_major_formatter(FuncFormatter(plain_number))


@dataclass
class Split:
    """Points of one series sorted by how much the sample says about them."""

    line_x: list[float] = field(default_factory=list)  # resolved or interval-less points, joined by the line
    line_y: list[float] = field(default_factory=list)
    bar_x: list[float] = field(default_factory=list)  # resolved: error bars
    bar_y: list[float] = field(default_factory=list)
    bar_lo: list[float] = field(default_factory=list)
    bar_hi: list[float] = field(default_factory=list)
    least_x: list[float] = field(default_factory=list)  # unresolved, bounded from below
    least_y: list[float] = field(default_factory=list)
    most_x: list[float] = field(default_factory=list)  # unresolved, bounded from above
    most_y: list[float] = field(default_factory=list)

    @property
    def drawn(self) -> int:
        return len(self.line_x) + len(self.least_x) + len(self.most_x)

    def values(self) -> list[float]:
        """Every y the chart will draw (for choosing the scale)."""
        return [*self.line_y, *self.bar_lo, *self.bar_hi, *self.least_y, *self.most_y]


def split(xs: Sequence[float], values: Sequence[float | None], cis: Sequence[QuantileCI | None]) -> Split:
    """Sort points into resolved, at-least, at-most and interval-less (None values without a bound are gaps)."""
    out = Split()
    for x, value, ci in zip(xs, values, cis, strict=True):
        if ci is None:
            if value is not None:
                out.line_x.append(x)
                out.line_y.append(value)
            continue
        if ci.resolved and ci.lo is not None and ci.hi is not None and value is not None:
            out.line_x.append(x)
            out.line_y.append(value)
            out.bar_x.append(x)
            out.bar_y.append(value)
            out.bar_lo.append(max(0.0, value - ci.lo))
            out.bar_hi.append(max(0.0, ci.hi - value))
        elif ci.lo is not None:
            out.least_x.append(x)
            out.least_y.append(ci.lo)
        elif ci.hi is not None:
            out.most_x.append(x)
            out.most_y.append(ci.hi)
    return out


def draw(ax: Axes, pts: Split, colour: str, *, linestyle: object = "-", linewidth: float = 1.4,
         marker: str | None = "o", markersize: float = 3.5, capsize: float = 2.5) -> None:
    """The series: a line through resolved points, error bars, open triangles for one-sided bounds."""
    if pts.line_x:
        ax.plot(pts.line_x, pts.line_y, linestyle=linestyle, linewidth=linewidth, color=colour, marker=marker,
                markersize=markersize)
    if pts.bar_x:
        ax.errorbar(pts.bar_x, pts.bar_y, yerr=[pts.bar_lo, pts.bar_hi], fmt="none", ecolor=colour,
                    elinewidth=max(0.8, linewidth * 0.7), capsize=capsize, alpha=0.85)
    if pts.least_x:
        ax.plot(pts.least_x, pts.least_y, linestyle="none", marker="^", markersize=markersize + 2.5,
                markerfacecolor="white", markeredgecolor=colour, markeredgewidth=1.3)
    if pts.most_x:
        ax.plot(pts.most_x, pts.most_y, linestyle="none", marker="v", markersize=markersize + 2.5,
                markerfacecolor="white", markeredgecolor=colour, markeredgewidth=1.3)


def legend_handles(confidence: float) -> list[Line2D]:
    """Legend entries explaining error bars and open triangles."""
    return [Line2D([], [], color="#444444", marker="|", markersize=9, linestyle="none",
                   label=f"{confidence:.0%} interval"),
            Line2D([], [], color="#444444", marker="^", markerfacecolor="white", markersize=6, linestyle="none",
                   label="unresolved: at least")]
