"""The headline from findings and effect rows: which arm it speaks of, the figures it quotes (the rows' own), what
stopped a go and the next action by finding code, the word limit, and summaries written before findings."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.report.headline import MAX_WORDS, breaking_arm, headline
from harness.schema.findings import Finding, SettlePlan
from harness.schema.intervals import RatioCI
from harness.schema.summary import ArmSummary, EffectRow, Summary

BUSY = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "demo-busy-precut" / "summary.json"


@pytest.fixture()
def summary() -> Summary:
    return Summary.model_validate_json(BUSY.read_text())


def _row(rule: str, test: str, measure: str, step: int, ratio: float, lo: float, hi: float, *, versus: str,
         outcome: str, limit: float, deciding: bool = False, plan: SettlePlan | None = None) -> EffectRow:
    return EffectRow.model_validate({
        "rule": rule, "test": test, "measure": measure, "step": step, "label": f"c{8 * 2 ** step}",
        "versus": versus, "interval": RatioCI(ratio=ratio, lo=lo, hi=hi, resolved=True, confidence=0.99),
        "limit": limit, "pass_limit": limit if test == "harm" else None, "outcome": outcome, "deciding": deciding,
        "settle_plan": plan})


def _with(summary: Summary, verdict: str, recommended: str, arms: list[ArmSummary]) -> Summary:
    return summary.model_copy(update={"verdict": verdict, "recommended_arm": recommended, "arms": arms})


def test_a_no_go_quotes_the_harm_rows_own_figures_and_keeps_the_baseline(summary: Summary) -> None:
    base, cpu, _disk = summary.arms
    harm = _row("ttft-p90-vs-baseline", "harm", "p90 TTFT", 1, 1.4213, 1.2311, 1.8649, versus=base.name,
                outcome="harm shown", limit=1.1)
    bad = cpu.model_copy(update={"decision": "no-go", "effects": [harm], "findings": [
        Finding(code="harm-shown", role="veto", rule="ttft-p90-vs-baseline", kind="regression", status="breach",
                step=1)]})
    head = headline(_with(summary, "no-go", base.name, [base, bad]))
    assert head.lead == f"NO-GO: keep the GPU-only baseline ({base.name})."
    assert f"{bad.name} is no-go:" in head.body and "p90 TTFT at c16" in head.body
    assert "1.42x (1.23–1.86), limit 1.10x" in head.body  # the row's figures, rounded, not re-derived
    assert head.word_count <= MAX_WORDS


def test_a_hold_on_the_first_tier_says_what_it_bought_and_how_long_the_next_steps_should_be(
        summary: Summary) -> None:
    base, cpu, _disk = summary.arms
    gain = _row("earns-its-keep", "improvement", "output_tokens_per_s", 0, 1.45, 1.38, 1.54, versus=base.name,
                outcome="improvement shown", limit=1.05)
    open_harm = _row("ttft-p90-vs-baseline", "harm", "p90 TTFT", 1, 0.91, 0.73, 1.22, versus=base.name,
                     outcome="not settled", limit=1.1,
                     plan=SettlePlan(by_load=True, way="show-within", factor=2.3, requests=950, seconds=40.0))
    held = cpu.model_copy(update={"decision": "hold", "effects": [gain, open_harm], "break_even": None,
                                  "findings": [Finding(code="harm-unresolved", role="hold",
                                                       rule="ttft-p90-vs-baseline", kind="regression",
                                                       status="unresolved", step=1)]})
    s = _with(summary, "hold", base.name, [base, held])
    head = headline(s)
    assert breaking_arm(s) is held
    assert head.lead == f"HOLD: keep the GPU-only baseline ({base.name}) for now."
    assert f"{held.name} raised output throughput 1.45x (1.38–1.54) over the baseline at c8" in head.body
    assert "Next: c16 steps of ~40 s would settle it." in head.body
    assert head.body.index("raised") < head.body.index("is hold") < head.body.index("Next:")


@pytest.mark.parametrize(("code", "expected"), [
    ("no-own-tier-hits", "its tier served no cache hits"),
    ("host-contended", "Next: rerun on a quieter host."),
    ("budget-shared", "Next: revisit the SLO or the load."),
    ("arm-failed", "harness run --resume RUN_DIR"),
])
def test_what_stopped_a_go_follows_the_finding_code(summary: Summary, code: str, expected: str) -> None:
    base, cpu, disk = summary.arms
    decision = "failed" if code == "arm-failed" else "slo-unmet" if code == "budget-shared" else "hold"
    stopped = disk.model_copy(update={"decision": decision, "findings": [Finding.model_validate(
        {"code": code, "role": "failure" if code == "arm-failed" else "hold"})]})
    head = headline(_with(summary, "go", cpu.name, [base, cpu, stopped]))
    assert head.lead.startswith(f"GO: ship {cpu.name} (16 GiB CPU tier)")
    assert f"({disk.name}) is {decision}" in head.body and expected in head.text
    assert head.word_count <= MAX_WORDS


def test_a_latency_gain_reads_as_the_arms_latency_over_the_others(summary: Summary) -> None:
    base, cpu, _disk = summary.arms
    gain = _row("earns-its-keep", "improvement", "ttft_p95", 2, 1.25, 1.10, 1.60, versus=base.name,
                outcome="improvement shown", limit=1.05, deciding=True)
    shipped = cpu.model_copy(update={"decision": "go", "effects": [gain], "break_even": None, "findings": []})
    head = headline(_with(summary, "go", cpu.name, [base, shipped]))
    assert "cut p95 TTFT to 0.80x (0.62–0.91) over the baseline at c32" in head.body  # 1/1.25, 1/1.60, 1/1.10


def test_the_word_limit_holds_when_every_part_is_long(summary: Summary) -> None:
    base, cpu, disk = summary.arms
    long_rule = " ".join(["word"] * 80)
    stopped = disk.model_copy(update={"decision": "hold", "findings": [Finding(
        code="passed", role="hold", rule=long_rule)]})
    head = headline(_with(summary, "go", cpu.name, [base, cpu, stopped]))
    assert head.word_count <= MAX_WORDS and head.text.endswith("…")


def test_a_summary_written_before_findings_reads_its_rules(summary: Summary) -> None:
    assert all(not arm.findings for arm in summary.arms)  # schema 6: no findings on disk
    head = headline(summary)  # as that harness decided it: the disk tier no-go on a p90 TTFT regression at c8
    assert "(cpu-16g-disk) is no-go: p90 TTFT at c8 is worse than the baseline's: 1.42x (1.23–1.86)" in head.body


@pytest.mark.parametrize(("verdict", "keep_tiers", "expected"), [
    ("hold", None, "No arm ran, so nothing was compared."),
    ("hold", [], "Only the baseline ran; no tier arm was compared with it."),
    ("hold", ["skipped"], "Every tier arm was skipped; none was compared with the baseline."),
    ("failed", ["failed"], "An arm was stopped by a failure of the harness itself."),
])
def test_a_run_with_nothing_to_compare_says_so_instead_of_an_empty_body(
        summary: Summary, verdict: str, keep_tiers: list[str] | None, expected: str) -> None:
    base = summary.arms[0]
    arms = [] if keep_tiers is None else [base] + [
        summary.arms[1].model_copy(update={"decision": d, "findings": [], "effects": []}) for d in keep_tiers]
    head = headline(_with(summary, verdict, base.name, arms))
    assert head.body.startswith(expected), head.text
    assert "harness's" not in head.text and head.word_count <= MAX_WORDS
