"""The forest plot drawn as inline SVG by hand: a fixed grid, every text escaped and fitted to its column.

Columns: the row label (step · measure vs what), the log-ratio axis, the ratio as the effect table writes it. Rows
are ``ROW_H`` apart, so the height grows with the rows and labels never share a line; text is shortened with
an ellipsis to its column's width (estimated generously for DejaVu Sans, the font the SVG asks for), the full
text staying in each row's ``<title>``. Tick labels are kept only where they do not crowd each other.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable

from markupsafe import Markup, escape

from harness.report.forest_rows import AXIS_MAX, AXIS_MIN, Axis, ForestBlock, ForestRow, finite
from harness.report.templating import no_controls, slug

WIDTH = 960
ROW_H, ARM_H, SUB_H = 22, 30, 20
LABEL_X, LABEL_END = 24, 336
AXIS_X0, AXIS_X1 = 350, 746
TEXT_X, TEXT_END = 762, 952
FONT = "DejaVu Sans, Verdana, sans-serif"
_TICKS = (1.0, 0.5, 2.0, 0.8, 1.25, 0.25, 4.0, 0.67, 1.5, 0.33, 3.0, 0.9, 1.1, 0.2, 5.0)
_TOP_TICKS_FROM = 12  # rows from which tick labels are repeated above the plot


def text_px(text: str, size: float) -> float:
    """A generous estimate of the text's width in pixels at ``size`` px (DejaVu Sans is a wide face)."""
    em = 0.0
    for ch in text:
        if unicodedata.combining(ch):
            continue
        if unicodedata.east_asian_width(ch) in ("W", "F"):
            em += 1.05
        elif ch in "mwMW@%":
            em += 1.0
        elif ch.isupper():
            em += 0.78
        elif ch in " .,:;'|!il1[]()":
            em += 0.45
        else:
            em += 0.64
    return em * size


def fit(text: str, width: float, size: float) -> str:
    """``text`` shortened with an ellipsis until it fits ``width`` pixels."""
    text = no_controls(" ".join(text.split()))
    if text_px(text, size) <= width:
        return text
    while text and text_px(text + "…", size) > width:
        text = text[:-1]
    return text.rstrip() + "…"


def _text(x: float, y: float, text: str, size: float, cls: str, extra: str = "") -> str:
    return f'<text class="{cls}" x="{x:.1f}" y="{y:.1f}" font-size="{size:g}"{extra}>{escape(text)}</text>'


def ticks(axis: Axis, size: float = 11) -> list[float]:
    """Tick values by priority (1x first), each kept only if its label clears those already kept."""
    kept: list[float] = []
    for value in _TICKS:
        if not axis.inside(value):
            continue
        half = text_px(tick_label(value), size) / 2 + 6
        if all(abs(axis.x(value) - axis.x(k)) >= half + text_px(tick_label(k), size) / 2 for k in kept):
            kept.append(value)
    return sorted(kept)


def tick_label(value: float) -> str:
    return f"{value:g}x"


def _arrow(x: float, y: float, right: bool, colour: str, point: bool = False) -> str:
    """A clip marker at an axis edge; ``point``: the row's point itself lies beyond (bigger, outlined)."""
    size = 6.0 if point else 4.5
    tip, back = (x, x - 2 * size) if right else (x, x + 2 * size)
    edge = ' stroke="#1d1f23" stroke-width="1.5"' if point else ""
    cls = "clip point-beyond" if point else "clip"
    return (f'<polygon class="{cls}" points="{tip:.1f},{y:.1f} {back:.1f},{y - size:.1f} {back:.1f},{y + size:.1f}" '
            f'fill="{colour}"{edge}/>')


def _interval(row: ForestRow, axis: Axis, y: float) -> list[str]:
    """The interval line (solid when resolved, dashed when not), clip arrows, and the point (resolved only)."""
    ci, colour = row.interval, row.colour
    lo, hi, point = finite(ci.lo), finite(ci.hi), finite(ci.ratio)
    resolved = row.resolved and point is not None
    if not resolved and lo is None and hi is None:  # nothing bounds it: a faint dashed line over the whole axis
        return [f'<line class="ci unres none" x1="{axis.x0}" y1="{y}" x2="{axis.x1}" y2="{y}" stroke="{colour}" '
                f'stroke-width="1.5" stroke-dasharray="3 4" opacity="0.6"/>']
    left = lo is None or lo < axis.lo
    right = hi is None or hi > axis.hi
    x_lo = axis.x0 if lo is None else axis.x(lo)
    x_hi = axis.x1 if hi is None else axis.x(hi)
    width = 3 if row.deciding else 2
    dash = "" if resolved else ' stroke-dasharray="5 3"'
    cls = "ci" if resolved else "ci unres"
    out = [f'<line class="{cls}" x1="{x_lo:.1f}" y1="{y}" x2="{x_hi:.1f}" y2="{y}" stroke="{colour}" '
           f'stroke-width="{width}"{dash}/>']
    beyond = resolved and point is not None and not axis.inside(point)  # the point itself lies off the axis
    out += [_arrow(axis.x0, y, False, colour, beyond and point is not None and point < axis.lo)] if left else []
    out += [_arrow(axis.x1, y, True, colour, beyond and point is not None and point > axis.hi)] if right else []
    if resolved and point is not None and not beyond:
        r = 5.5 if row.deciding else 4.0
        edge = ' stroke="#1d1f23" stroke-width="1.5"' if row.deciding else ' stroke="#ffffff" stroke-width="1"'
        out.append(f'<circle class="point" cx="{axis.x(point):.1f}" cy="{y}" r="{r}" fill="{colour}"{edge}/>')
    return out


def _limits(row: ForestRow, axis: Axis, y: float) -> list[str]:
    out = []
    same = row.limit is not None and row.pass_limit is not None and abs(row.limit - row.pass_limit) < 1e-9
    for value, cls, dash in ((row.limit, "limit", ""), (row.pass_limit, "limit pass", ' stroke-dasharray="2 2"')):
        if value is None or (same and cls == "limit pass"):  # one limit both ways: one tick
            continue
        clipped = " clipped" if not axis.inside(value) else ""
        x = axis.x(value)
        out.append(f'<line class="{cls}{clipped}" x1="{x:.1f}" y1="{y - 8}" x2="{x:.1f}" y2="{y + 8}" '
                   f'stroke="#1d1f23" stroke-width="2"{dash}/>')
    return out


def _row(row: ForestRow, axis: Axis, y: float) -> str:
    mid = y + ROW_H / 2
    label = ("★ " if row.deciding else "") + row.label
    weight = ' font-weight="bold"' if row.deciding else ""
    parts = [f'<g class="forest-row o-{slug(row.outcome)}{" deciding" if row.deciding else ""}">',
             f"<title>{escape(no_controls(row.title))}</title>"]
    parts.append(_text(LABEL_X, mid + 4, fit(label, LABEL_END - LABEL_X, 12), 12, "label", weight))
    parts += _limits(row, axis, mid)
    parts += _interval(row, axis, mid)
    ratio_cls = "ratio" if row.resolved else "ratio unres"
    style = "" if row.resolved else ' font-style="italic"'
    parts.append(_text(TEXT_X, mid + 4, fit(row.ratio_text, TEXT_END - TEXT_X, 11), 11, ratio_cls,
                       f' fill="{row.colour}"{style}'))
    parts.append("</g>")
    return "".join(parts)


def _tick_labels(axis: Axis, values: Iterable[float], y: float) -> list[str]:
    return [_text(axis.x(v), y, tick_label(v), 11, "tick", ' text-anchor="middle" fill="#5b6270"') for v in values]


def _description(blocks: list[ForestBlock]) -> str:
    counts = Counter(r.outcome for b in blocks for r in b.rows)
    arms = len({b.arm.name for b in blocks})
    said = ", ".join(f"{n} {outcome}" for outcome, n in counts.most_common())
    return (f"{sum(counts.values())} comparisons of {arms} tier arm{'s' if arms != 1 else ''} on a log-ratio axis "
            f"({said}). Each row: the interval, the limit it was held against (black tick) and the 1x line; the "
            f"same rows are listed as text below the plot.")


def draw(blocks: list[ForestBlock], span: tuple[float, float]) -> Markup:
    """The whole plot as one ``<svg>`` element (every text escaped; ids unique on the page)."""
    rows = sum(len(b.rows) for b in blocks)
    axis = Axis(max(span[0], AXIS_MIN), min(span[1], AXIS_MAX), AXIS_X0, AXIS_X1)
    values = ticks(axis)
    top = 24 if rows >= _TOP_TICKS_FROM else 6
    body: list[str] = _tick_labels(axis, values, 16) if rows >= _TOP_TICKS_FROM else []
    shades: list[str] = []
    y, zebra, last_arm = float(top), False, None
    for block in blocks:
        if block.arm.name != last_arm:
            if last_arm is not None:
                body.append(f'<line class="sep" x1="0" y1="{y + 4}" x2="{WIDTH}" y2="{y + 4}" stroke="#d9dde3"/>')
            head = f"{block.arm.name} ({block.arm.tier}) · {block.arm.decision}"
            body.append(_text(8, y + 22, fit(head, WIDTH - 16, 13), 13, "arm", ' font-weight="bold"'))
            y, last_arm = y + ARM_H, block.arm.name
        body.append(_text(16, y + 14, fit(block.heading, WIDTH - 24, 11), 11, "sub",
                          ' fill="#5b6270" font-style="italic"'))
        y += SUB_H
        for row in block.rows:
            if zebra:
                shades.append(f'<rect class="zebra" x="0" y="{y}" width="{WIDTH}" height="{ROW_H}" fill="#f5f6f8"/>')
            body.append(_row(row, axis, y))
            y, zebra = y + ROW_H, not zebra
    bottom = y + 4
    grid = [f'<line class="grid{" one" if v == 1.0 else ""}" x1="{axis.x(v):.1f}" y1="{top}" x2="{axis.x(v):.1f}" '
            f'y2="{bottom}" stroke="{"#1d1f23" if v == 1.0 else "#d9dde3"}" '
            f'stroke-width="{1.5 if v == 1.0 else 1}"/>' for v in values]
    if 1.0 not in values and axis.inside(1.0):
        grid.append(f'<line class="grid one" x1="{axis.x(1.0):.1f}" y1="{top}" x2="{axis.x(1.0):.1f}" '
                    f'y2="{bottom}" stroke="#1d1f23" stroke-width="1.5"/>')
    foot = [f'<line class="axis" x1="{AXIS_X0}" y1="{bottom}" x2="{AXIS_X1}" y2="{bottom}" stroke="#5b6270"/>',
            *_tick_labels(axis, values, bottom + 16),
            _text((AXIS_X0 + AXIS_X1) / 2, bottom + 34, "ratio (log scale); black tick: the row's limit", 11,
                  "axis-title", ' text-anchor="middle" fill="#5b6270"')]
    height = bottom + 44
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" id="forest-plot" class="forest" viewBox="0 0 {WIDTH} '
            f'{height:.0f}" style="max-width: {WIDTH}px" role="img" aria-labelledby="forest-title forest-desc" '
            f'font-family="{FONT}" fill="#1d1f23">'
            f'<title id="forest-title">Forest plot: every deciding comparison, its interval and its limit</title>'
            f'<desc id="forest-desc">{escape(_description(blocks))}</desc>')
    # Shading under the grid, the grid under the rows' marks; every text went through escape() above.
    return Markup(head + "".join(shades) + "".join(grid) + "".join(body) + "".join(foot) + "</svg>")
