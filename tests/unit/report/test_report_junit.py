"""junit.xml: a suite per arm, a case per rule and decision, failures only where the outcome is bad."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from harness.report.headline import headline
from harness.report.junit import render_junit
from harness.report.load import load_summary
from tests.support.sample import sample_summary

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "runs"


def _parse(text: str) -> ET.Element:
    return ET.fromstring(text.encode())


def _case(root: ET.Element, suite: str, name: str) -> ET.Element:
    for s in root.iter("testsuite"):
        if s.get("name") == suite:
            for c in s.iter("testcase"):
                if c.get("name") == name:
                    return c
    raise AssertionError(f"no case {name!r} in suite {suite!r}")


def test_structure_and_counts() -> None:
    root = _parse(render_junit(sample_summary()))
    suites = [s.get("name") for s in root.iter("testsuite")]
    assert suites == ["run", "arm gpu-only", "arm cpu", "arm tiered"]
    total = sum(1 for _ in root.iter("testcase"))
    assert root.get("tests") == str(total)
    for s in root.iter("testsuite"):
        assert s.get("tests") == str(len(s.findall("testcase")))
        assert s.get("skipped") == str(sum(1 for c in s.findall("testcase") if c.find("skipped") is not None))
    tiered = next(s for s in root.iter("testsuite") if s.get("name") == "arm tiered")
    names = [c.get("name") for c in tiered.findall("testcase")]
    assert names[0] == "decision"
    assert "rule ttft-p99-budget @ c32" in names
    assert "drill storage_pressure" in names and "drill cache_loss" in names


def test_simulated_property_on_every_suite() -> None:
    root = _parse(render_junit(sample_summary()))
    assert root.get("name", "").startswith("[SIMULATED] ")
    for s in root.iter("testsuite"):
        props = {p.get("name"): p.get("value") for p in s.iter("property")}
        assert props["simulated"] == "true"
        assert props["verdict"] == "go"
    real = _parse(render_junit(load_summary(FIXTURES / "nogo-vllm")))
    assert all(p.get("value") == "false" for p in real.iter("property") if p.get("name") == "simulated")


def test_go_run_with_a_held_arm_has_no_failures() -> None:
    root = _parse(render_junit(sample_summary()))
    assert root.get("failures") == "0" and root.get("errors") == "0"
    held = _case(root, "arm tiered", "decision").find("skipped")
    assert held is not None and held.get("message", "").startswith("hold: ")
    breach = _case(root, "arm tiered", "rule drill:storage_pressure").find("skipped")
    assert breach is not None and "did not fail the arm (decision hold)" in breach.get("message", "")
    unresolved = _case(root, "arm tiered", "rule earns-keep @ c32").find("skipped")
    assert unresolved is not None
    assert unresolved.get("message", "").startswith("unresolved (could not be judged, not a pass): 1.04x [0.97–1.11]"
                                                    " vs 1.11x")


def test_unresolved_rule_is_skipped_with_interval_never_a_silent_pass() -> None:
    root = _parse(render_junit(sample_summary()))
    case = _case(root, "arm cpu", "rule ttft-p99-vs-baseline @ c4")
    skipped = case.find("skipped")
    assert skipped is not None and "unresolved (point 0.93x)" in skipped.get("message", "")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["status"] == "unresolved" and props["interval_resolved"] == "false" and props["threshold"] == "1.1"
    passed = _case(root, "arm cpu", "rule ttft-p99-vs-baseline @ c32")
    assert passed.find("skipped") is None and passed.find("failure") is None
    assert (passed.findtext("system-out") or "").startswith("0.65x [0.59–0.72] vs 1.10x: ")


def test_shared_breach_is_not_a_failure_of_the_tier() -> None:
    base = sample_summary()
    arms = [a.model_copy(update={"decision": "no-go"}) if a.name == "tiered" else a for a in base.arms]
    root = _parse(render_junit(base.model_copy(update={"arms": arms})))
    shared = _case(root, "arm tiered", "rule ttft-p99-budget @ c32")
    assert shared.find("failure") is None
    skipped = shared.find("skipped")
    assert skipped is not None and "shared with the baseline" in skipped.get("message", "")


def test_slo_unmet_fails_the_slo_case_not_the_tiers() -> None:
    base = sample_summary()
    arms = [a.model_copy(update={"decision": "slo-unmet"}) if a.name != "gpu-only" else a for a in base.arms]
    unmet = base.model_copy(update={"verdict": "slo-unmet", "exit_code": 5, "recommended_arm": None, "arms": arms,
                                    "verdict_reason": "every arm breaks the 2000 ms p99 TTFT budget at c32"})
    root = _parse(render_junit(unmet))
    slo = _case(root, "run", "slo").find("failure")
    assert slo is not None and slo.get("message", "").startswith("slo-unmet: every arm, the baseline included")
    assert "ttft p99 2,000 ms" in slo.get("message", "")
    assert _case(root, "run", "verdict").find("failure") is None
    for arm in ("cpu", "tiered"):
        decision = _case(root, f"arm {arm}", "decision")
        assert decision.find("failure") is None and decision.find("skipped") is not None
    assert root.get("failures") == "1"
    ok = _parse(render_junit(base))
    assert _case(ok, "run", "slo").find("failure") is None


def test_decision_output_carries_percentiles_with_intervals() -> None:
    root = _parse(render_junit(sample_summary()))
    out = _case(root, "arm cpu", "decision").findtext("system-out") or ""
    assert "c4: p99 TTFT ≥ 321 ms (n=216, unresolved)" in out
    assert "c32: p99 TTFT 1,720 ms [1,580–1,924] n=907" in out
    assert "ended early at 41 s" in out
    suite = next(s for s in root.iter("testsuite") if s.get("name") == "arm cpu")
    props = {p.get("name"): p.get("value") for p in suite.find("properties") or []}
    assert props["ttft_p99"] == "1,720 ms [1,580–1,924] n=907" and props["ttft_p99_resolved"] == "true"
    stats = _case(root, "run", "statistics").findtext("system-out") or ""
    assert "sequential steps saved 8% of load time" in stats and "noise floor" in stats


def test_dry_run_rule_is_property_and_system_out_only() -> None:
    root = _parse(render_junit(sample_summary()))
    case = _case(root, "arm tiered", "rule itl-p99-budget @ c32")
    assert case.find("failure") is None and case.find("skipped") is None
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["dry_run"] == "true" and props["status"] == "breach"
    out = case.find("system-out")
    assert out is not None and (out.text or "").startswith("dry run (reported, never decides): breach")


def test_no_go_and_failed_arms_fail_with_reasons() -> None:
    summary = load_summary(FIXTURES / "nogo-vllm")
    root = _parse(render_junit(summary))
    verdict = _case(root, "run", "verdict").find("failure")
    assert verdict is not None and verdict.get("message", "") == headline(summary).text  # the headline first
    assert f"\n\nno-go: {summary.verdict_reason}" in (verdict.text or "")  # the full reasoning in the body
    cpu = _case(root, "arm cpu", "decision").find("failure")
    assert cpu is not None and "critical 2000 ms budget" in cpu.get("message", "")
    rule = _case(root, "arm cpu", "rule ttft-p99-budget @ c32").find("failure")
    assert rule is not None and rule.get("message", "").startswith("breach: ")
    tiered = _case(root, "arm tiered", "decision").find("failure")
    assert tiered is not None
    assert "CPU Offloading is currently only supported" in (tiered.text or "")
    assert int(root.get("failures", "0")) == 4  # verdict, cpu decision + rule, tiered decision


def test_skipped_arms_and_failed_baseline() -> None:
    root = _parse(render_junit(load_summary(FIXTURES / "failed-baseline")))
    assert _case(root, "arm gpu-only", "decision").find("failure") is not None
    assert _case(root, "arm cpu", "decision").find("skipped") is not None
    assert _case(root, "run", "verdict").find("failure") is not None


def test_characters_xml_forbids_are_replaced() -> None:
    base = sample_summary()
    text = render_junit(base.model_copy(update={"verdict_reason": "bell\x07 nul\x00 esc\x1b ok"}))
    root = _parse(text)  # would raise on a forbidden character
    out = _case(root, "run", "verdict").find("system-out")
    assert out is not None and "bell\ufffd nul\ufffd esc\ufffd ok" in (out.text or "")
