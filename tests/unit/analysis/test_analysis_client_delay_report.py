"""The step figure in the reports (tested beside the analysis that computes it): the first-token client delay
(p50 / p99) per step in report.html and summary.md, a step over its budget flagged with the note, and older summaries
and runs (no delay figure) rendering as "not recorded"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.report.html import render_html
from harness.report.load import load_summary
from harness.report.markdown import render_markdown
from harness.schema.intervals import Percentiles
from harness.schema.summary import Summary
from tests.support.sample import sample_summary

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "runs"
NOTE = ("load generator saturated: first tokens waited in the client p99 12.5 ms between arrival and parsing "
        "(limit 5 ms) with 1 process(es)")


def _summary() -> Summary:
    summary = sample_summary()
    for arm in summary.arms:
        for i, st in enumerate(arm.steps):
            st.first_token_delay_ms = Percentiles(p50=0.25 + i, p95=1.5 + i, p99=2.5 + i, count=100)
    flagged = summary.arms[0].steps[-1]
    flagged.first_token_delay_ms = Percentiles(p50=0.5, p95=9.0, p99=12.5, count=100)
    flagged.client = flagged.client.model_copy(update={"saturated": True, "note": NOTE})
    return Summary.model_validate_json(summary.model_dump_json())  # what summary.json gives back


def test_html_shows_the_delay_per_step_and_flags_the_step_over_budget() -> None:
    summary = _summary()
    html = render_html(summary, None)
    arm = summary.arms[0]
    table = html.split(f'id="client-health-{arm.name}"', 1)[1].split("</table>", 1)[0]
    assert "first-token delay p50 / p99" in table
    assert "0.25 ms / 2.5 ms" in table and "0.50 ms / 12.5 ms" in table
    assert "load generator saturated" in table and "first tokens waited in the client p99 12.5 ms" in table
    assert table.count("<tr>") == len(arm.steps) + 1  # header + one row per step


def test_markdown_lists_the_delay_per_step() -> None:
    md = render_markdown(_summary())
    section = md.split("### Client-side delay per step", 1)[1].split("###", 1)[0]
    arm = _summary().arms[0]
    assert f"- {arm.name} · {arm.steps[0].label}: first-token delay p50 0.25 ms, p99 2.5 ms; send lag p99 " in section
    assert "**saturated**" in section and "12.5 ms" in section


@pytest.mark.parametrize("name", ["demo-sim", "nogo-vllm", "failed-baseline"])
def test_summaries_without_the_figure_still_render(name: str) -> None:
    summary = load_summary(FIXTURES / name)
    html = render_html(summary, None)
    md = render_markdown(summary)
    assert all(st.first_token_delay_ms is None for arm in summary.arms for st in arm.steps)
    if any(arm.steps for arm in summary.arms):
        assert "not recorded" in html
    assert "### Client-side delay per step" not in md  # only where some step has the figure


def test_harness_report_rebuilds_a_run_recorded_before_the_parse_time(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "demo-prelayout", run)
    result = CliRunner().invoke(app, ["report", str(run)])
    assert result.exit_code == 0, result.output
    html = (run / "report.html").read_text(encoding="utf-8")
    assert "client-health-" in html and "not recorded" in html
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert all(st["first_token_delay_ms"] is None for arm in summary["arms"] for st in arm["steps"])
