"""The capacity section in report.html and summary.md: a rate search where one arm met nothing and one was not
searched, text escaped, and the chart's fallback when no probe has samples."""

from __future__ import annotations

from pathlib import Path

from harness.config.search import SearchSpec
from harness.decision.capacity_summary import VERDICT_NOTE, arm_capacity
from harness.report.charts_capacity import capacity_chart
from harness.report.writers import write_reports
from harness.schema.capacity import CapacityProbe, CapacitySection
from harness.schema.intervals import QuantileCI
from harness.schema.summary import Summary
from tests.support.sample import XSS, sample_summary

SPEC = SearchSpec.model_validate({"metric": "e2e", "percentile": 95, "budget_ms": 800, "kind": "rate", "low": 0.5,
                                  "high": 8, "resolution": "20%"})


def probe(load: float, outcome: str, lo: float | None, hi: float | None, n: int = 400) -> CapacityProbe:
    return CapacityProbe.model_validate({
        "step": -1000, "label": f"search-r{load:g}", "load": load, "requests": n, "errors": 0, "n": n,
        "duration_s": 10.0, "value_ms": (lo or 0.0) + 5, "outcome": outcome, "reason": "why",
        "ci": QuantileCI(lo=lo, hi=hi, resolved=lo is not None and hi is not None, n=n)})


def with_capacity(summary: Summary) -> Summary:
    tier = arm_capacity(SPEC, "rate", f"cpu{XSS}", [probe(0.5, "meets", 300, 400), probe(1, "meets", 500, 700),
                                                    probe(2, "breaks", 900, 1200)])
    base = arm_capacity(SPEC, "rate", "baseline", [probe(0.5, "breaks", 820, 990)])
    lost = arm_capacity(SPEC, "rate", "disk", [])
    section = CapacitySection(metric="e2e", percentile=95, budget_ms=800, kind="rate", low=0.5, high=8,
                              arms=[base, tier, lost], comparison=[f"the CPU tier (cpu{XSS}) holds 1 req/s"],
                              note=VERDICT_NOTE)
    return summary.model_copy(update={"capacity": section})


def test_report_and_markdown_show_every_arm_and_probe(tmp_path: Path) -> None:
    summary = with_capacity(sample_summary())
    written = write_reports(summary, tmp_path, only=["html", "md", "json"])
    html = written["html"].read_text(encoding="utf-8")
    md = written["md"].read_text(encoding="utf-8")
    assert "<h2>Capacity at SLO: p95 E2E ≤ 800 ms</h2>" in html
    assert "baseline: no probed load met p95 E2E ≤ 800 ms; the lowest, 0.5 req/s, had p95 825 ms [820 ms, 990 ms]" \
        in html
    assert "disk: no capacity probe ran" in html and 'class="pill cap-not-run"' in html
    assert html.count('class="pill probe-') == 4 and 'id="chart-capacity-figure"' in html
    assert XSS not in html and "&lt;script&gt;" in html
    assert "### Capacity at SLO (p95 E2E ≤ 800 ms)" in md and XSS not in md
    assert "| baseline | 1 | search-r0.5 | 400 | 0 |" in md
    assert VERDICT_NOTE in md
    assert Summary.model_validate_json(written["json"].read_text(encoding="utf-8")).capacity == summary.capacity


def test_chart_without_samples_says_so() -> None:
    summary = with_capacity(sample_summary())
    assert summary.capacity is not None
    empty = summary.capacity.model_copy(update={"arms": [arm_capacity(SPEC, "rate", "a", [])]})
    chart = capacity_chart(summary.model_copy(update={"capacity": empty}))
    assert chart.svg is None and chart.note == "No probe has latency samples."
    assert capacity_chart(sample_summary()).note == "No capacity search in this scenario."
