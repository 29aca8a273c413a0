"""Inline SVG from matplotlib: no prolog or external DTD, ids unique per chart, deterministic, text escaped."""

from __future__ import annotations

import re

from harness.core.svg import chart_style, new_figure, to_svg


def _chart(name: str, label: str) -> str:
    with chart_style(name):
        fig = new_figure(4, 2)
        ax = fig.add_subplot()
        ax.plot([1, 2, 3], [3, 1, 2], marker="o", label=label)
        ax.set_title(label)
        ax.legend()
        return str(to_svg(fig, name))


def test_svg_is_inline_ready() -> None:
    svg = _chart("one", "a")
    assert svg.startswith("<svg ")
    assert svg.endswith("</svg>")
    for banned in ("<?xml", "<!DOCTYPE", "<metadata", "svg11.dtd", "matplotlib.org", "<script", "<image"):
        assert banned not in svg
    assert 'style="max-width: 384px"' in svg
    assert re.search(r'<svg[^>]*\swidth="', svg) is None


def test_ids_are_prefixed_and_references_follow() -> None:
    svg = _chart("one", "a")
    ids = re.findall(r'\sid="([^"]+)"', svg)
    assert ids
    assert all(i.startswith(("one-", "chart-one")) for i in ids)
    refs = re.findall(r'href="#([^"]+)"', svg) + re.findall(r"url\(#([^)]+)\)", svg)
    assert refs
    assert set(refs) <= set(ids)


def test_rendering_is_deterministic() -> None:
    assert _chart("same", "a") == _chart("same", "a")


def test_text_is_escaped_and_not_parsed_as_tex() -> None:
    svg = _chart("evil", '<script>alert(1)</script> $x^2$ "q" id="fake"')
    assert "<script>" not in svg
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in svg
    assert "$x^2$" in svg  # drawn as written, not as TeX
    assert 'id="evil-fake"' not in svg  # text content is never rewritten as an id
