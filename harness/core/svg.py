"""Matplotlib figures as inline SVG: no pyplot, no external references, deterministic ids, text kept as text.

Every chart is a :class:`matplotlib.figure.Figure` drawn with the SVG backend and trimmed for inlining into HTML:
the XML prolog, DOCTYPE (which names an external DTD) and metadata are dropped. ``svg.hashsalt`` is the chart's
name so element ids are stable between renders and distinct between the charts of one page. Text stays as
``<text>`` (``svg.fonttype: none``), which matplotlib escapes, and maths parsing is off so a ``$`` in an arm or
model name is drawn as written instead of being read as TeX.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import matplotlib as mpl
from markupsafe import Markup
from matplotlib.figure import Figure

# Colour-blind-safe palette (Okabe-Ito) for arms, and fixed colours for hit sources and verdicts.
ARM_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
HIT_COLOURS = {"gpu": "#009E73", "cpu": "#0072B2", "disk": "#E69F00", "miss": "#D55E00"}
BREACH_COLOUR = "#D55E00"
SLO_COLOUR = "#B00020"

_RC: dict[str, object] = {
    "svg.fonttype": "none",
    "text.parse_math": False,
    "axes.formatter.use_mathtext": False,
    "font.family": ["DejaVu Sans", "sans-serif"],
    "font.size": 9.0,
    "axes.titlesize": 10.0,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.fontsize": 8.0,
    "legend.frameon": False,
}
_PROLOG = re.compile(r"\A.*?(?=<svg\b)", re.DOTALL)
_METADATA = re.compile(r"<metadata>.*?</metadata>\s*", re.DOTALL)
_DIMENSION = re.compile(r'(<svg\b[^>]*?)\s(width|height)="([0-9.]+)pt"')
_TAG = re.compile(r"<[^<>]*>")
_ID_REF = re.compile(r'(\sid="|href="#|url\(#)(?!chart-)')


def arm_colour(index: int) -> str:
    """The colour of the arm at this position in the summary."""
    return ARM_COLOURS[index % len(ARM_COLOURS)]


def short(text: str, limit: int = 32) -> str:
    """Text shortened for a chart label (the tables carry the full text)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


@contextmanager
def chart_style(name: str) -> Iterator[None]:
    """Matplotlib settings for one chart; ``name`` salts element ids."""
    settings = cast(Any, {**_RC, "svg.hashsalt": f"harness-{name}", "svg.id": f"chart-{name}"})
    with mpl.rc_context(settings):
        yield


def new_figure(width_in: float = 7.5, height_in: float = 3.2, *, left: float = 0.7, right: float = 0.15,
               bottom: float = 0.55, top: float = 0.35, wspace: float = 0.22, hspace: float = 0.5) -> Figure:
    """A figure not registered with pyplot (nothing global is kept, nothing needs closing).

    Margins are in inches and fixed: matplotlib's constrained layout measures every label and made rendering
    several times slower; the charts here have predictable labels, so fixed margins fit them.
    """
    fig = Figure(figsize=(width_in, height_in))
    fig.subplots_adjust(left=left / width_in, right=1 - right / width_in, bottom=bottom / height_in,
                        top=1 - top / height_in, wspace=wspace, hspace=hspace)
    return fig


def to_svg(fig: Figure, name: str) -> Markup:
    """The figure as an inline ``<svg>`` element (scales to its container; safe to place in the page as is).

    Element ids and the references to them get the prefix ``<name>-`` so several charts can share one page.
    """
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = _METADATA.sub("", _PROLOG.sub("", buf.getvalue(), count=1), count=1)
    # Let CSS size the chart: drop the fixed width/height, keep the viewBox, never grow past the drawn size.
    width_pt = fig.get_figwidth() * 72.0
    for _ in range(2):
        text = _DIMENSION.sub(r"\1", text, count=1)
    text = text.replace("<svg ", f'<svg style="max-width: {width_pt * 96 / 72:.0f}px" ', 1)
    # Only inside tags: text nodes cannot hold "<", and matplotlib escapes ">" in attribute values.
    text = _TAG.sub(lambda tag: _ID_REF.sub(lambda m: f"{m.group(1)}{name}-", tag.group(0)), text)
    return Markup(text.strip())  # matplotlib wrote it and escaped every text node; nothing else is in it
