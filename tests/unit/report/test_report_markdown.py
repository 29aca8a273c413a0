"""summary.md: SIMULATED on the first line, one table row per arm, short enough for a PR comment."""

from __future__ import annotations

from pathlib import Path

from harness.report.load import load_summary
from harness.report.markdown import render_markdown
from harness.report.sample import sample_summary
from harness.report.templating import md_text

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "runs"


def test_first_line_names_simulated_and_verdict() -> None:
    text = render_markdown(sample_summary())
    first = text.splitlines()[0]
    assert first == "## SIMULATED · GO: ship cpu"
    real = render_markdown(load_summary(FIXTURES / "nogo-vllm"))
    assert real.splitlines()[0] == "## NO-GO: keep the baseline"
    assert "SIMULATED" not in real


def test_table_has_a_row_per_arm_with_consistent_columns() -> None:
    text = render_markdown(sample_summary())
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(rows) == 4  # header + three arms
    widths = {line.replace("\\|", "").count("|") for line in rows}
    assert len(widths) == 1
    assert any(line.startswith("| cpu | cpu | **go** | c32 | 1,720 ms") for line in rows)
    failed = render_markdown(load_summary(FIXTURES / "failed-baseline"))
    frows = [line for line in failed.splitlines() if line.startswith("| ")]
    assert {line.replace("\\|", "").count("|") for line in frows} == widths


def test_missing_hit_rate_reads_missing() -> None:
    text = render_markdown(load_summary(FIXTURES / "nogo-vllm"))
    row = next(line for line in text.splitlines() if line.startswith("| cpu |"))
    assert "| missing |" in row
    assert "| 0.0% |" not in row


def test_rules_that_did_not_pass_and_drills_are_listed() -> None:
    text = render_markdown(sample_summary())
    assert "### Rules that did not pass" in text
    assert "(dry run, never decides)" in text
    assert "### Drills" in text
    assert "storage\\_pressure on tiered: **fail**" in text


def test_long_summaries_are_compacted_under_the_limit() -> None:
    base = sample_summary()
    arms = [a.model_copy(update={"reasons": ["x" * 400] * 3}) for a in base.arms]
    long = base.model_copy(update={"arms": arms, "warnings": ["w" * 500] * 200})
    text = render_markdown(long, max_chars=20_000)
    assert len(text) <= 20_000
    assert "Details were left out" in text
    huge = base.model_copy(update={"arms": [a.model_copy(update={"reasons": ["y" * 30_000]}) for a in base.arms]})
    cut = render_markdown(huge, max_chars=20_000)
    assert len(cut) <= 20_000
    assert cut.rstrip().endswith("see report.html)")


def test_md_text_escapes_markdown_and_flattens_lines() -> None:
    assert md_text("a|b *c* _d_ [e](f) `g`\nh") == "a\\|b \\*c\\* \\_d\\_ \\[e\\](f) \\`g\\` h"
    assert md_text("bell\x07") == "bell\ufffd"
