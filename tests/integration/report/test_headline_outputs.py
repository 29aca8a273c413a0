"""The headline, on the demo (run on the virtual clock) and on the busy-host fixture rebuilt: at most 60 words, no
method names, the verdict and the arm first, then the deciding effect's own figures, then the arm that stopped a go;
and the same headline opens summary.md, report.html's banner and the terminal's verdict."""

from __future__ import annotations

import html
import io
import re
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from harness.decision.summarize import rebuild_summary
from harness.report.headline import MAX_WORDS, breaking_arm, headline, legacy_finding, shown_gain
from harness.report.writers import render_run
from harness.run.live import LiveOutput
from harness.run.options import RunOptions, RunResult
from harness.run.orchestrator import run_rollout
from harness.schema.summary import Summary

ROOT = Path(__file__).resolve().parents[3]
BUSY = ROOT / "tests" / "fixtures" / "runs" / "demo-busy-precut"
METHOD_WORDS = re.compile(r"bootstrap|Mann|Whitney|Holm|Bonferroni|MSER|one-sided|alpha|p=|percentile|BCa|"
                          r"noise floor|\[", re.I)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    out = tmp_path_factory.mktemp("demo")
    result = run_rollout(ROOT / "scenarios" / "demo-sim.yaml", RunOptions(out_dir=out, virtual=True),
                         say=lambda _m: None)
    assert result.summary is not None and result.run_dir is not None, result.message
    return result


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Summary]:
    run_dir = tmp_path_factory.mktemp("busy") / "run"
    shutil.copytree(BUSY, run_dir)
    summary = rebuild_summary(run_dir)
    render_run(run_dir, summary)
    return run_dir, summary


def _figure(summary: Summary) -> str:
    """The shipped arm's deciding gain as the headline must print it, from the effect row's own numbers."""
    shipped = next(a for a in summary.arms if a.name == summary.recommended_arm)
    row = shown_gain(shipped)
    assert row is not None and row.interval.lo is not None and row.interval.hi is not None
    assert row.measure == "output_tokens_per_s"  # a throughput ratio: printed as measured, not inverted
    return f"{row.interval.ratio:.2f}x ({row.interval.lo:.2f}–{row.interval.hi:.2f}) over the baseline at {row.label}"


def _check_shape(summary: Summary) -> str:
    head = headline(summary)
    assert head.word_count <= MAX_WORDS, head.text
    assert not METHOD_WORDS.search(head.text), head.text
    assert head.lead.startswith(f"{summary.verdict.upper()}: ship {summary.recommended_arm} ")
    assert _figure(summary) in head.body
    breaker = breaking_arm(summary)
    assert breaker is not None and f"({breaker.name}) is {breaker.decision}" in head.body
    assert head.body.index(_figure(summary)) < head.body.index(breaker.name)  # what it bought, then what stopped
    return head.text


def test_the_demos_headline(demo: RunResult) -> None:
    assert demo.summary is not None and demo.summary.verdict == "go"
    _check_shape(demo.summary)
    breaker = breaking_arm(demo.summary)
    assert breaker is not None and breaker.findings[0].code in ("gain-unresolved", "gain-not-shown")


def test_the_busy_hosts_headline_names_host_contention_and_the_next_step(busy: tuple[Path, Summary]) -> None:
    _run_dir, summary = busy
    text = _check_shape(summary)
    breaker = breaking_arm(summary)
    assert breaker is not None and breaker.findings[0].code == "host-contended"
    assert "Next: rerun on a quieter host." in text


def test_every_output_opens_with_the_headline(busy: tuple[Path, Summary], demo: RunResult) -> None:
    run_dir, summary = busy
    head = headline(summary)
    first = (run_dir / "summary.md").read_text(encoding="utf-8").splitlines()[0]
    assert first.startswith("**SIMULATED · ")
    plain = re.sub(r"\\(.)", r"\1", first.replace("**", ""))  # the Markdown escapes undone
    assert html.unescape(plain) == f"SIMULATED · {head.text}"
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    banner = re.search(r"<h1>(.*?)</h1>\s*<p class=\"reason\" id=\"headline\">(.*?)</p>", page, re.S)
    assert banner is not None and html.unescape(banner.group(1)) == head.lead
    assert html.unescape(banner.group(2)) == head.body
    buffer = io.StringIO()
    LiveOutput(Console(file=buffer, width=400, color_system=None), quiet=False).finish(demo)
    assert demo.summary is not None
    shown = buffer.getvalue().strip().splitlines()[0]
    assert shown.startswith(f"SIMULATED (virtual clock) · {headline(demo.summary).lead}")
    assert headline(demo.summary).body in shown


def test_a_summary_without_findings_names_the_rule_the_decision_stage_put_first(
        busy: tuple[Path, Summary], demo: RunResult) -> None:
    """legacy_finding reads a schema-6 summary by the decision stage's own roles and ranks: on runs the decision
    stage judged, its finding is the first one decide_arm recorded, for every no-go and hold arm."""
    assert demo.summary is not None
    judged = [a for s in (busy[1], demo.summary) for a in s.arms if a.decision in ("no-go", "hold")]
    assert judged, "the busy host's and the demo's runs have a hold arm"
    for arm in judged:
        legacy = legacy_finding(arm.model_copy(update={"findings": []}))
        assert legacy is not None, arm.name
        first = arm.findings[0]
        assert (legacy.code, legacy.rule, legacy.step, legacy.rule_index) == (
            first.code, first.rule, first.step, first.rule_index), arm.name
