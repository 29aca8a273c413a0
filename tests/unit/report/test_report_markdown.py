"""summary.md: SIMULATED on the first line, one table row per arm, short enough for a PR comment."""

from __future__ import annotations

from pathlib import Path

from harness.report.load import load_summary
from harness.report.markdown import render_markdown
from harness.report.templating import md_text
from tests.support.sample import sample_summary

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "runs"


def test_first_line_names_simulated_and_verdict() -> None:
    text = render_markdown(sample_summary())
    first = text.splitlines()[0]
    assert first.startswith("**SIMULATED · GO: ship cpu (16 GiB CPU tier).** ")
    real = render_markdown(load_summary(FIXTURES / "nogo-vllm"))
    assert real.splitlines()[0].startswith("**NO-GO: keep the GPU-only baseline (gpu-only).** cpu is no-go: ")
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


def test_percentiles_carry_intervals_and_unresolved_is_marked() -> None:
    text = render_markdown(sample_summary())
    row = next(line for line in text.splitlines() if line.startswith("| cpu |"))
    assert "1,720 ms \\[1,580–1,924\\] n=907" in row
    assert "order-statistic (exact binomial, distribution-free)" in text and "a p99 needs 368" in text
    assert "Load time: 499 s of 540 s planned; sequential steps saved 8% of load time" in text
    assert "**unresolved** (could not be judged; not a pass) · unresolved (point 0.93x) vs 1.10x" in text
    assert "### Noise floor (baseline A/A re-run)" in text and "1.06x \\[1.01–1.11\\]" in text
    assert "### Steps that ended early (sequential)" in text
    first = sample_summary().arms[1].steps[0]
    small = sample_summary().model_copy(update={"arms": [a.model_copy(update={"steps": [first]})
                                                         for a in sample_summary().arms]})
    assert "≥ 321 ms (n=216, unresolved)" in render_markdown(small)


def test_slo_unmet_is_called_out() -> None:
    unmet = sample_summary().model_copy(update={"verdict": "slo-unmet", "exit_code": 5, "recommended_arm": None})
    text = render_markdown(unmet)
    assert text.splitlines()[0] == ("**SIMULATED · SLO UNMET: no arm meets the SLO, the baseline included.** Every "
                                    "arm breaks the same latency budget (ttft-p99-budget at c32), so the tier is not "
                                    "to blame. Next: revisit the SLO, the load or the hardware.")
    assert "> **SLO UNMET**: every arm, the baseline included" in text
