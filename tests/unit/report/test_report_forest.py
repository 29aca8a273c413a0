"""The forest plot at the top of report.html (harness.report.forest): one row per deciding comparison grouped by arm,
a log axis with ticks and the 1x line, each row's limit, unresolved intervals dashed and never a point, clipped
bounds marked, colour by outcome with a legend, escaped text, a text fallback, and no plot without tier arms."""

from __future__ import annotations

import itertools
import math
import re
import xml.etree.ElementTree as ET

import pytest

from harness.report.forest import forest_plot
from harness.report.forest_draw import AXIS_X0, AXIS_X1, LABEL_END, ROW_H, TEXT_END, fit, text_px, tick_label, ticks
from harness.report.forest_rows import OUTCOME_COLOURS, Axis, axis_span, forest_blocks
from harness.report.html import render_html
from harness.schema.intervals import RatioCI
from harness.schema.summary import Summary
from tests.support.sample import XSS, hostile_summary, sample_summary
from tests.support.sample_effects import with_effects

NS = {"s": "http://www.w3.org/2000/svg"}


def _svg(summary: Summary) -> ET.Element:
    plot = forest_plot(summary)
    assert plot is not None
    return ET.fromstring(str(plot.svg))


def _rows(svg: ET.Element) -> list[ET.Element]:
    return [g for g in svg.iter("{http://www.w3.org/2000/svg}g") if "forest-row" in g.get("class", "")]


def _cls(el: ET.Element) -> set[str]:
    return set(el.get("class", "").split())


def _children(row: ET.Element, tag: str) -> list[ET.Element]:
    return row.findall(f"s:{tag}", NS)


def test_no_tier_comparison_no_plot() -> None:
    plain = sample_summary()
    assert all(not a.effects for a in plain.arms)
    assert forest_plot(plain) is None
    assert 'id="forest"' not in render_html(plain)
    assert forest_plot(plain.model_copy(update={"arms": plain.arms[:1]})) is None


def test_one_row_per_comparison_grouped_by_arm_at_the_top() -> None:
    summary = with_effects(sample_summary())
    plot = forest_plot(summary)
    assert plot is not None and plot.rows == 13
    blocks = forest_blocks(summary)
    assert [(b.arm.name, b.test, len(b.rows)) for b in blocks] == [
        ("cpu", "improvement", 5), ("cpu", "harm", 2), ("tiered", "improvement", 3), ("tiered", "harm", 3)]
    svg = ET.fromstring(str(plot.svg))
    arms = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text") if "arm" in _cls(t)]
    assert arms == ["cpu (cpu) · go", "tiered (tiered) · hold"]
    html = render_html(summary)
    assert html.index('<section id="forest">') < html.index('<section id="effects">') < html.index('id="fit"')
    assert len(plot.lines) == 13 and plot.lines[0].startswith("cpu: c4 output tokens/s vs gpu-only: unresolved")
    assert [o for o, _ in plot.legend] == [o for o in OUTCOME_COLOURS]  # every outcome occurs once in the sample
    assert plot.dashed and plot.clipped and "dashed: unresolved" in html and "beyond the axis" in html
    clean = [e.model_copy(update={"interval": e.interval.model_copy(update={"lo": 1.1, "hi": 1.3, "ratio": 1.2,
                                                                            "resolved": True})})
             for e in summary.arms[1].effects]
    calm = summary.model_copy(update={"arms": [summary.arms[0], summary.arms[1].model_copy(update={"effects": clean})]})
    plain = forest_plot(calm)
    assert plain is not None and not plain.dashed and not plain.clipped
    assert "beyond the axis" not in render_html(calm)


def test_axis_ticks_one_line_and_limits() -> None:
    summary = with_effects(sample_summary())
    svg = _svg(summary)
    span = axis_span([e for a in summary.arms for e in a.effects])
    assert span == (0.2, 5.0)  # 0.08 and 9.4 lie beyond: the widest axis, clipped
    axis = Axis(*span, AXIS_X0, AXIS_X1)
    labels = [t.text for t in svg.iter("{http://www.w3.org/2000/svg}text") if "tick" in _cls(t)]
    assert "1x" in labels and "0.5x" in labels and "2x" in labels
    one = [ln for ln in svg.iter("{http://www.w3.org/2000/svg}line") if "one" in _cls(ln)]
    assert len(one) == 1 and float(one[0].get("x1", "0")) == pytest.approx(axis.x(1.0), abs=0.1)
    for row, effect in zip(_rows(svg), [e for a in summary.arms for e in a.effects], strict=True):
        marks = [float(ln.get("x1", "0")) for ln in _children(row, "line") if "limit" in _cls(ln)]
        expected = [axis.x(v) for v in (effect.limit, effect.pass_limit) if v is not None]
        assert marks == pytest.approx(expected, abs=0.1)
    one_limit = summary.arms[2].effects[-1].model_copy(update={"limit": 1.1, "pass_limit": 1.1})
    arm = summary.arms[2].model_copy(update={"effects": [one_limit]})
    (row,) = _rows(_svg(summary.model_copy(update={"arms": [summary.arms[0], arm]})))
    assert len([ln for ln in _children(row, "line") if "limit" in _cls(ln)]) == 1  # the same limit both ways


@pytest.mark.parametrize("span", [(0.5, 2.0), (0.2, 5.0), (0.9, 1.2), (0.45, 3.3)])
def test_tick_labels_never_crowd(span: tuple[float, float]) -> None:
    axis = Axis(*span, AXIS_X0, AXIS_X1)
    values = ticks(axis)
    assert 1.0 in values and len(values) >= 2
    extents = sorted((axis.x(v) - text_px(tick_label(v), 11) / 2, axis.x(v) + text_px(tick_label(v), 11) / 2)
                     for v in values)
    assert all(a[1] + 6 <= b[0] for a, b in itertools.pairwise(extents))


def test_unresolved_is_dashed_never_a_point_and_bounds_beyond_the_axis_are_clipped() -> None:
    summary = with_effects(sample_summary())
    effects = [e for a in summary.arms for e in a.effects]
    rows = _rows(_svg(summary))
    for row, effect in zip(rows, effects, strict=True):
        points = _children(row, "circle")
        cis = [ln for ln in _children(row, "line") if "ci" in _cls(ln)]
        clips = _children(row, "polygon")
        assert len(cis) == 1
        ci = effect.interval
        if not ci.resolved:
            assert points == [] and "unres" in _cls(cis[0]) and cis[0].get("stroke-dasharray")
            assert (len(clips) == 1) == (ci.lo is not None and ci.hi is None)  # a lower bound only: open upwards
        elif ci.ratio is not None and not 0.2 <= ci.ratio <= 5.0:
            assert points == [] and len(clips) == 1 and "point-beyond" in _cls(clips[0])  # one bold arrow
        else:
            assert len(points) == 1 and cis[0].get("stroke-dasharray") is None
            assert len(clips) == (1 if ci.hi is not None and math.isinf(ci.hi) else 0)
        assert row.get("class", "").split()[1] == "o-" + effect.outcome.replace(" ", "-")
        assert cis[0].get("stroke") == OUTCOME_COLOURS[effect.outcome]


def test_many_rows_grow_the_plot_one_line_each() -> None:
    small, big = _svg(with_effects(sample_summary())), _svg(with_effects(sample_summary(), repeat=5))
    height = [float(s.get("viewBox", "").split()[3]) for s in (small, big)]
    assert height[1] - height[0] >= 52 * ROW_H
    ys = [float(t.get("y", "0")) for r in _rows(big) for t in _children(r, "text") if "label" in _cls(t)]
    assert len(ys) == 65 and all(b - a >= ROW_H for a, b in itertools.pairwise(ys))


def test_labels_fit_their_columns_and_hostile_text_is_escaped() -> None:
    summary = with_effects(hostile_summary())
    plot = forest_plot(summary)
    assert plot is not None
    text = str(plot.svg)
    assert XSS not in text and "<img" not in text and "&lt;script&gt;" in text
    svg = ET.fromstring(text)  # escaped well enough to parse as XML
    for t in svg.iter("{http://www.w3.org/2000/svg}text"):
        width = text_px(t.text or "", float(t.get("font-size", "0")))
        if "label" in _cls(t):
            assert 24 + width <= LABEL_END, t.text
        elif "ratio" in _cls(t):
            assert float(t.get("x", "0")) + width <= TEXT_END, t.text
    titles = [r.find("s:title", NS) for r in _rows(svg)]
    assert all(t is not None and "cpu<script>" in (t.text or "") for t in titles[:7])  # full text in the tooltip
    html = render_html(summary)
    section = html[html.index('<section id="forest">'):html.index('<section id="effects">')]
    assert XSS not in section and "&amp;lt;" not in section and "{{" not in section


def test_fit_shortens_with_an_ellipsis() -> None:
    name = "a-very-long-arm-name-" * 6 + "末尾"
    short = fit(name, 200, 12)
    assert short.endswith("…") and text_px(short, 12) <= 200 and name.startswith(short[:-1])
    assert fit("cpu", 200, 12) == "cpu"
    assert re.fullmatch(r"[^\x00-\x1f]*", fit("a\x1b[31mred", 200, 12))


@pytest.mark.parametrize(("lo", "hi", "arrows"), [(None, None, 0), (None, 1.3, 1), (0.0, math.inf, 2)])
def test_missing_bounds_are_never_a_point(lo: float | None, hi: float | None, arrows: int) -> None:
    """A "resolved" interval with a bound missing reads unresolved, as in the effect table: dashed, clipped."""
    summary = with_effects(sample_summary())
    cpu = summary.arms[1]
    row = cpu.effects[0].model_copy(update={"interval": RatioCI(ratio=1.1, lo=lo, hi=hi, resolved=True),
                                            "outcome": "not settled"})
    one = summary.model_copy(update={"arms": [summary.arms[0], cpu.model_copy(update={"effects": [row]})]})
    (g,) = _rows(_svg(one))
    (ci,) = [ln for ln in _children(g, "line") if "ci" in _cls(ln)]
    if lo is None:
        assert _children(g, "circle") == [] and "unres" in _cls(ci)
    else:  # resolved, unbounded both ways (0 is no bound on a log axis): the point, arrows at both edges
        assert len(_children(g, "circle")) == 1 and float(ci.get("x1", "0")) == AXIS_X0
        assert float(ci.get("x2", "0")) == AXIS_X1
    assert len(_children(g, "polygon")) == arrows
