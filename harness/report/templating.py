"""The jinja2 environments: templates ship inside the package (``harness/templates``), autoescape always on.

Two environments share the loader and filters:

* HTML (``*.html.j2``): autoescape, so every value from a summary (model and arm names, reasons, log lines,
  commands) is HTML-escaped. Only chart SVG from :mod:`harness.core.svg` is :class:`~markupsafe.Markup`.
* Markdown (``*.md.j2``): autoescape too (GitHub renders entities, so ``<script>`` shows as text), and a
  ``finalize`` hook that backslash-escapes Markdown punctuation and flattens newlines, so a value cannot open a
  table cell, a link or a code span.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from harness.core.version import __version__
from harness.report import effects, fit_words, fmt, fmt_ci, noise_floor_words, validation

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~#!])")
_NEWLINES = re.compile(r"[\r\n]+")
# C0 controls other than tab/newline/carriage return, DEL and C1: not allowed in HTML or XML text, and terminal
# escape sequences in server logs would otherwise reach whoever cats the file.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def no_controls(value: str) -> str:
    """Control characters replaced by U+FFFD."""
    return _CONTROL.sub("\ufffd", value)


def md_text(value: str) -> str:
    """Text safe inside a Markdown line or table cell (HTML escaping is left to autoescape)."""
    return _MD_SPECIAL.sub(r"\\\1", _NEWLINES.sub(" ", no_controls(value)))


def _md_finalize(value: Any) -> Any:
    if isinstance(value, Markup) or not isinstance(value, str):
        return value
    return md_text(value)


def _html_finalize(value: Any) -> Any:
    if isinstance(value, Markup) or not isinstance(value, str):
        return value
    return no_controls(value)


def slug(value: str) -> str:
    """An HTML id fragment from any text (letters, digits and dashes)."""
    text = re.sub(r"[^a-z0-9]+", "-", value.lower()).strip("-")
    return text[:60] or "x"


def _common(env: Environment) -> Environment:
    env.filters.update({
        "ms": fmt.ms, "num": fmt.num, "pct": fmt.pct, "ratio": fmt.ratio, "gib": fmt.gib, "tokens": fmt.tokens,
        "join_short": fmt.join, "slug": slug,
    })
    env.globals.update({
        "top_step": fmt.top_step, "hit_rate": fmt.hit_rate, "hit_missing": fmt.hit_missing,
        "arm_missing": fmt.arm_missing, "missing_names": fmt.missing_names,
        "step_label": fmt.step_label,
        "harness_version": __version__, "MISSING": fmt.MISSING,
        "num": fmt.num, "pct": fmt.pct, "tokens": fmt.tokens, "ms": fmt.ms, "gib": fmt.gib,
        "pv": fmt_ci.pct_view, "iv": fmt_ci.interval_view, "point_view": fmt_ci.point_view,
        "ratio_view": fmt_ci.ratio_view, "evidence": fmt_ci.evidence_text, "threshold_text": fmt_ci.threshold_text,
        "stats_legend": fmt_ci.legend, "load_time_text": fmt_ci.load_time_text,
        "validation_banner": validation.validation_banner, "validation_rows": validation.validation_rows,
        "effect_arms": effects.effect_arms, "effect_views": effects.effect_views,
        "break_even_line": effects.break_even_line, "break_even_words": effects.break_even_words,
        "effects_legend": effects.LEGEND,
        "fit_evidence": fit_words.fit_evidence, "noise_floor_line": noise_floor_words.noise_floor_line,
    })
    return env


@cache
def html_env() -> Environment:
    """The environment for HTML templates."""
    env = Environment(
        loader=PackageLoader("harness", "templates"),
        autoescape=select_autoescape(enabled_extensions=("html", "html.j2", "xml"), default=True),
        finalize=_html_finalize, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    return _common(env)


@cache
def md_env() -> Environment:
    """The environment for Markdown templates."""
    env = Environment(
        loader=PackageLoader("harness", "templates"),
        autoescape=select_autoescape(enabled_extensions=("md", "md.j2"), default=True),
        finalize=_md_finalize, undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["md"] = md_text
    return _common(env)
