"""The effect table and the break-even load in every output: summary.md (table, break-even, what would settle the
open comparisons), junit.xml (the decision's system-out and properties, reasons in order), report.html (a section
at the top, escaped), the terminal's verdict lines; and an older summary without them still renders."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from types import SimpleNamespace

from rich.console import Console

from harness.report.effects import effect_lines, effect_views, limit_text, measure_name
from harness.report.html import render_html
from harness.report.junit import render_junit
from harness.report.markdown import render_markdown
from harness.run.live import LiveOutput
from harness.schema.intervals import RatioCI
from harness.schema.summary import BreakEven, EffectRow, Summary
from tests.support.sample import XSS, sample_summary


def _row(label: str, step: int, measure: str, outcome: str, test: str = "improvement", deciding: bool = False,
         versus: str = "gpu-only", settle: str | None = None) -> EffectRow:
    return EffectRow(rule="earns-its-keep" if test == "improvement" else "ttft-p90-vs-baseline", test=test,  # type: ignore[arg-type]
                     measure=measure, step=step, label=label, concurrency=int(label[1:]), versus=versus,
                     interval=RatioCI(ratio=1.51, lo=1.43, hi=1.6, resolved=True, confidence=0.996,
                                      method="percentile bootstrap"),
                     limit=1.0689 if test == "improvement" else 1.12,
                     pass_limit=None if test == "improvement" else 1.08,
                     limit_text="min_improvement 1.05 x noise floor 1.018" if test == "improvement" else
                     "max_ratio 1.10 x noise floor 1.018", floor=1.018, outcome=outcome,  # type: ignore[arg-type]
                     deciding=deciding, n=724, n_versus=475, settle=settle,
                     source=f"requests.parquet, step {step} ({label}): 724 vs 475 ({versus}) requests")


def with_effects(hostile: bool = False) -> Summary:
    base = sample_summary()
    versus = XSS if hostile else "gpu-only"
    rows = [_row("c8", 0, "ttft_p95", "not settled", versus=versus, settle="~1.8x the requests would show it"),
            _row("c32", 2, "output_tokens_per_s", "improvement shown", deciding=True, versus=versus),
            _row("c32", 2, "p90 TTFT", "within limit", test="harm", versus=versus)]
    be = BreakEven(status="helps-from", improvement_from=rows[1], improvement_steps=["c32"], steps=["c8", "c32"],
                   text=f"improvement shown from c32 (output_tokens_per_s 1.51x [1.43, 1.60] vs {versus} at c32)")
    arms = [a.model_copy(update={"effects": rows, "break_even": be}) if a.name == "cpu" else a for a in base.arms]
    return base.model_copy(update={"arms": arms})


def test_views_name_measures_limits_and_outcomes() -> None:
    rows = with_effects().arms[1].effects
    assert [measure_name(r) for r in rows] == ["p95 TTFT", "output tokens/s", "p90 TTFT"]
    assert limit_text(rows[1]) == "≥ 1.07 (min_improvement 1.05 x noise floor 1.018)"
    assert limit_text(rows[2]) == "harm > 1.12, within ≤ 1.08 (max_ratio 1.10 x noise floor 1.018)"
    views = effect_views(with_effects().arms[1])
    assert views[1].ratio == "1.51x [1.43–1.60] at 99.6%" and views[1].deciding and views[1].n == "724 / 475"
    lines = effect_lines(with_effects().arms[1])
    assert lines[1] == ("c32 output tokens/s vs gpu-only: 1.51x [1.43–1.60] at 99.6%; limit ≥ 1.07 (min_improvement "
                        "1.05 x noise floor 1.018); improvement shown [decided]; n=724 / 475")
    assert lines[0].endswith("; to settle: ~1.8x the requests would show it")


def test_summary_md_shows_the_table_the_break_even_and_what_would_settle() -> None:
    text = render_markdown(with_effects())
    assert "### Effect sizes: what each tier bought, with what certainty" in text
    rows = [line for line in text.splitlines() if line.startswith(("| cpu | c8 |", "| cpu | c32 |"))]
    assert len(rows) == 3
    assert rows[1] == ("| cpu | c32 | output tokens/s | gpu-only | 1.51x \\[1.43–1.60\\] at 99.6% | ≥ 1.07 "
                       "(min\\_improvement 1.05 x noise floor 1.018) | **improvement shown** (decided) | 724 / 475 |")
    assert "- **cpu** break-even: improvement shown from c32" in text
    assert "- cpu · c8 · p95 TTFT 1.51x \\[1.43–1.60\\] at 99.6%: \\~1.8x the requests would show it" in text
    assert text.index("### Effect sizes") < text.index("### Rules that did not pass")  # effect sizes first
    assert {line.replace("\\|", "").count("|") for line in rows} == {9}
    compact = render_markdown(with_effects(), max_chars=len(text) - 1)  # the compact form keeps the table
    assert "### Effect sizes" in compact and "**improvement shown** (decided)" in compact


def test_summary_md_and_html_escape_the_table() -> None:
    md = render_markdown(with_effects(hostile=True))
    html = render_html(with_effects(hostile=True))
    assert XSS not in md and XSS not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    section = html[html.index('<section id="effects">'):html.index("</section>", html.index('<section id="effects">'))]
    assert "&lt;script&gt;" in section and "<script" not in section


def test_report_html_puts_the_effect_table_first() -> None:
    html = render_html(with_effects())
    assert '<a href="#effects">Effect sizes</a>' in html
    assert html.index('<section id="effects">') < html.index('<section id="fit">')
    assert '<tr class="e-improvement-shown deciding">' in html
    assert '<strong>Break-even load:</strong> improvement shown from c32' in html
    assert "to settle: ~1.8x the requests would show it" in html
    assert '<section id="effects">' not in render_html(sample_summary())  # no table invented


def test_junit_decision_carries_the_table_and_the_break_even() -> None:
    summary = with_effects()
    summary = summary.model_copy(update={"arms": [
        a.model_copy(update={"reasons": ["earns-its-keep: 1.51x [1.43, 1.60]", "ttft-p90-vs-baseline: within"]})
        if a.name == "cpu" else a for a in summary.arms]})
    root = ET.fromstring(render_junit(summary).encode())
    suite = next(s for s in root.iter("testsuite") if s.get("name") == "arm cpu")
    case = next(c for c in suite.iter("testcase") if c.get("name") == "decision")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["break_even_status"] == "helps-from"
    assert props["break_even"].startswith("improvement shown from c32")
    assert props["deciding_effect"] == "c32 output tokens/s 1.51x [1.43–1.60] at 99.6% (improvement shown)"
    out = case.findtext("system-out") or ""
    assert out.startswith("go: earns-its-keep: 1.51x [1.43, 1.60] ttft-p90-vs-baseline: within")
    assert "break-even: improvement shown from c32" in out
    assert "effect sizes (deciding comparisons per step):\n  c8 p95 TTFT" in out


def test_terminal_verdict_lines_carry_the_break_even() -> None:
    buf = io.StringIO()
    out = LiveOutput(Console(file=buf, width=400, color_system=None), quiet=True)
    summary = with_effects()
    out.finish(SimpleNamespace(summary=summary, run_dir=__import__("pathlib").Path("/tmp/run")))
    lines = buf.getvalue().splitlines()
    cpu = next(i for i, line in enumerate(lines) if line.lstrip().startswith("cpu "))
    assert "break-even: improvement shown from c32" in lines[cpu + 1]


def test_an_older_summary_without_effects_reads_and_renders() -> None:
    data = sample_summary().model_dump(mode="json")
    data["schema_version"] = 3
    for arm in data["arms"]:
        arm.pop("effects"), arm.pop("break_even")
    old = Summary.model_validate(data)
    assert all(a.effects == [] and a.break_even is None for a in old.arms)
    assert "### Effect sizes" not in render_markdown(old)
    assert '<section id="effects">' not in render_html(old)
    render_junit(old)
