"""Self-contained HTML report of a trace analysis: inline CSS, the curve as inline SVG, no scripts, no URLs.

All text from the trace (its path, warnings) is escaped by jinja2's autoescape; the SVG comes from matplotlib
(which escapes its own text) with the XML prologue, namespace URLs and ``xlink:`` prefixes removed, so the page
works offline and holds no ``http`` reference at all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import numpy as np
from markupsafe import Markup

from harness.trace.analysis import TraceAnalysis
from harness.trace.units import format_bytes

_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Trace analysis: {{ name }}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 60rem; color: #222; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: right; }
th { background: #f3f3f3; } td.l, th.l { text-align: left; }
.warn { color: #8a4b00; } svg { max-width: 100%; height: auto; }
</style>
</head>
<body>
<h1>Trace analysis</h1>
<p class="l">{{ doc.trace.path }} ({{ doc.trace.format }}), {{ doc.block_tokens }} tokens per block</p>
{% if doc.warnings %}<ul>{% for w in doc.warnings %}<li class="warn">{{ w }}</li>{% endfor %}</ul>{% endif %}
<h2>Summary</h2>
<table>
{% for label, value in summary %}<tr><th class="l">{{ label }}</th><td>{{ value }}</td></tr>
{% endfor %}</table>
<h2>LRU hit ratio by cache capacity</h2>
{{ svg }}
{% if doc.capacities %}<h2>At the given capacities</h2>
<table><tr><th>capacity</th><th>blocks</th><th>bytes</th><th>hit ratio</th><th>token hit ratio</th>
<th>share of achievable</th></tr>
{% for r in doc.capacities %}<tr><td>{{ r.given }}</td><td>{{ r.capacity_blocks }}</td>
<td>{{ nbytes(r.capacity_bytes) }}</td><td>{{ pct(r.hit_ratio) }}</td><td>{{ pct(r.token_hit_ratio) }}</td>
<td>{{ pct(r.share_of_achievable) }}</td></tr>
{% endfor %}</table>{% endif %}
<h2>Capacity for a share of the achievable hits</h2>
<table><tr><th>share</th><th>blocks</th><th>bytes</th></tr>
{% for r in doc.capacity_for_share %}<tr><td>{{ pct(r.share) }}</td><td>{{ r.capacity_blocks }}</td>
<td>{{ nbytes(r.capacity_bytes) }}</td></tr>
{% endfor %}</table>
{% if doc.tiers %}<h2>Tier split ({{ doc.tiers.mode }})</h2>
<table><tr><th>GPU</th><th>CPU</th><th>disk</th><th>GPU hits</th><th>CPU adds</th><th>disk adds</th><th>miss</th></tr>
{% for r in doc.tiers.rows %}<tr><td>{{ r.gpu.given }}</td><td>{{ r.cpu.given or "-" }}</td>
<td>{{ r.disk.given or "-" }}</td>
<td>{{ pct(r.hit_ratio.gpu) }}</td><td>{{ pct(r.hit_ratio.cpu) }}</td><td>{{ pct(r.hit_ratio.disk) }}</td>
<td>{{ pct(r.hit_ratio.miss) }}</td></tr>
{% endfor %}</table>{% endif %}
<h2>Reuse distance ({{ doc.reuse_distance.count }} reuses)</h2>
<table><tr><th class="l">measure</th><th>p50</th><th>p90</th><th>p99</th><th>max</th></tr>
{% for label, d, fmt in reuse %}{% if d %}<tr><td class="l">{{ label }}</td><td>{{ fmt(d.p50) }}</td>
<td>{{ fmt(d.p90) }}</td><td>{{ fmt(d.p99) }}</td><td>{{ fmt(d.max) }}</td></tr>{% endif %}
{% endfor %}</table>
</body>
</html>
"""


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100.0 * value:.2f}%"


def _nbytes(value: float | None) -> str:
    return "-" if value is None else format_bytes(value)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.6g}"


def curve_svg(analysis: TraceAnalysis) -> Markup:
    """The hit-ratio curve as an inline SVG element (log capacity axis, bytes when known), made the way the
    rollout report makes its charts (:mod:`harness.core.svg`)."""
    from harness.core.svg import chart_style, new_figure, to_svg  # matplotlib: only when a report is drawn

    curve = analysis.curve
    top = max(1, curve.max_capacity)
    caps = np.unique(np.rint(np.geomspace(1, top, num=400)).astype(np.int64))
    idx = np.minimum(caps, curve.max_capacity)
    scale = float(analysis.block_bytes) / 2**30 if analysis.block_bytes else 1.0
    with chart_style("trace-curve"):
        fig = new_figure(8.0, 4.5)
        ax = fig.subplots()
        xs = caps * scale
        ax.step(xs, curve.hit_blocks[idx] / max(1, curve.total_blocks), where="post", label="blocks")
        ax.step(xs, curve.hit_tokens[idx] / max(1, curve.total_tokens), where="post", label="prompt tokens")
        ax.set_xscale("log")
        ax.set_xlabel("LRU capacity (GiB of KV)" if analysis.block_bytes else "LRU capacity (blocks)")
        ax.set_ylabel("prefix hit ratio")
        ax.set_ylim(0, 1)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="upper left")
        return to_svg(fig, "trace-curve")


def render_html(analysis: TraceAnalysis) -> str:
    """The whole report as one HTML string."""
    doc: dict[str, Any] = analysis.document
    summary = [
        ("requests", f"{doc['requests']:,}"),
        ("blocks (accesses)", f"{doc['blocks']:,}"),
        ("unique blocks", f"{doc['unique_blocks']:,}"),
        ("prompt tokens", f"{doc['prompt_tokens']:,}"),
        ("duration", f"{doc['duration_s']:,.1f} s"),
        ("infinite-cache hit ratio (blocks)", _pct(doc["infinite_cache_hit_ratio"])),
        ("prompt tokens in reused prefixes", _pct(doc["reused_prefix_token_share"])),
        ("requests with a reused prefix", _pct(doc["requests_with_reuse"])),
        ("capacity for all achievable hits", f"{doc['curve']['max_capacity_blocks']:,} blocks"),
        ("KV bytes per block", _nbytes(doc["block_bytes"])),
    ]
    rd = doc["reuse_distance"]
    reuse = [("time (s)", rd["time_s"], _num), ("stack distance (blocks)", rd["blocks"], _num)]
    reuse.append(("stack distance (bytes)", rd["bytes"], _nbytes))
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    template = env.from_string(_TEMPLATE)
    return template.render(
        doc=doc,
        name=Path(str(doc["trace"]["path"])).name,
        summary=summary,
        svg=curve_svg(analysis),  # generated by matplotlib, which escapes its own text
        reuse=reuse,
        pct=_pct,
        nbytes=_nbytes,
    )


def write_html(analysis: TraceAnalysis, out: Path) -> None:
    """Write the report to ``out`` (parent directories must exist)."""
    out.write_text(render_html(analysis), encoding="utf-8")
