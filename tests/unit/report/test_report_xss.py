"""Text from servers, logs and scenarios is escaped in every output: HTML, Markdown, JUnit, JSON, index, compare."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from harness.report.commands import compare_command
from harness.report.index import write_index
from harness.report.writers import write_reports
from tests.support.sample import XSS, hostile_summary, write_sample_run

RAW = (XSS, "<img src=x", "<script")
ESCAPED_HTML = "&lt;script&gt;alert(1)&lt;/script&gt;"


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    results = tmp_path_factory.mktemp("results")
    run = write_sample_run(results / "run-a", hostile_summary())
    written = write_reports(hostile_summary(), run)
    index = write_index(results)
    texts = {name: path.read_text(encoding="utf-8") for name, path in written.items()}
    texts["index.html"] = index["html"].read_text(encoding="utf-8")
    texts["index.json"] = index["json"].read_text(encoding="utf-8")
    return texts


def test_no_raw_markup_in_any_output(outputs: dict[str, str]) -> None:
    assert set(outputs) == {"json", "md", "junit", "html", "index.html", "index.json"}
    for name, text in outputs.items():
        for raw in RAW:
            assert raw not in text, (name, raw)


def test_html_outputs_carry_the_escaped_text(outputs: dict[str, str]) -> None:
    html = outputs["html"]
    assert f"<dd>{ESCAPED_HTML}</dd>" in html  # the model name in the banner
    assert f"<title>[SIMULATED] GO: ship cpu{ESCAPED_HTML}" in html
    assert "&#34;&gt;&lt;img src=x onerror=alert(2)&gt;" in html  # attribute-breaking quote escaped too
    assert html.count(ESCAPED_HTML) > 20
    assert ESCAPED_HTML in outputs["index.html"]
    assert 'href="javascript' not in html
    assert "\x1b" not in html and "\x00" not in html  # log-tail control characters replaced


def test_svg_chart_text_is_escaped(outputs: dict[str, str]) -> None:
    html = outputs["html"]
    start = html.index('<section id="charts">')
    charts = html[start:html.index("</section>", start)]
    assert "&lt;script&gt;" in charts  # arm names in legends and titles
    assert "<script" not in charts


def test_markdown_escapes_html_and_markdown(outputs: dict[str, str]) -> None:
    md = outputs["md"]
    assert md.splitlines()[0].startswith(f"**SIMULATED · GO: ship cpu{ESCAPED_HTML} (16 GiB CPU tier).** ")
    assert "\\| \\*y\\*" in md  # a pipe cannot open a table cell, stars cannot embolden
    assert "&amp;amp;" in md
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    assert {line.replace("\\|", "").count("|") for line in rows} == {10}


def test_junit_escapes_and_round_trips(outputs: dict[str, str]) -> None:
    text = outputs["junit"]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    root = ET.fromstring(text.encode())
    models = {p.get("value") for p in root.iter("property") if p.get("name") == "model"}
    assert models == {XSS}  # the parser gets the original text back


def test_json_escapes_and_round_trips(outputs: dict[str, str]) -> None:
    for name in ("json", "index.json"):
        assert "\\u003cscript\\u003e" in outputs[name]
    assert json.loads(outputs["json"])["model"] == XSS
    assert json.loads(outputs["index.json"])["runs"][0]["model"] == XSS


def test_compare_output_is_escaped(tmp_path: Path) -> None:
    a = write_sample_run(tmp_path / "a", hostile_summary())
    b = write_sample_run(tmp_path / "b", hostile_summary().model_copy(update={"run_id": "b\x1b[2J\x07"}))
    runner = CliRunner()
    app = typer.Typer()
    app.command()(compare_command)
    as_json = runner.invoke(app, [str(a), str(b), "--json"])
    assert as_json.exit_code == 0, as_json.output
    assert "<script" not in as_json.output
    assert json.loads(as_json.output)["arms"][1]["name"] == f"cpu{XSS}"
    text = runner.invoke(app, [str(a), str(b)])
    assert text.exit_code == 0
    assert "B: b\\x1b[2J\\x07" in text.output  # control characters shown as escapes (harness.core.term.safe_text)
    assert "\x1b" not in text.output and "\x07" not in text.output
