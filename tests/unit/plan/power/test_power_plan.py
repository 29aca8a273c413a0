"""The power section of ``harness plan``: rates declared in the scenario, measured in a previous run (fixture run
directories and a written ``steps.jsonl``), offered by an open-loop level, unknown; the ``power`` warnings with their
fix; bad input through the CLI (exit 2, one message, no traceback)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from harness.cli import app
from harness.config import ScenarioError, load_scenario_text
from harness.host.facts import FakeHostFacts
from harness.plan.build import build_plan
from harness.plan.power import PowerInput, PowerInputError, plan_power, power_checks, read_run
from harness.plan.view import print_plan

ROOT = Path(__file__).resolve().parents[4]
RUNS = ROOT / "tests" / "fixtures" / "runs"
HOST = FakeHostFacts(mem_available=64 << 30, mem_total=128 << 30, default_disk_free=500 << 30)

SCENARIO = """
name: power
engine: {kind: sim, model: m, launcher: process}
arms:
  - {name: baseline, tier: gpu-only}
  - {name: cpu, tier: cpu, offload: {kind: vllm-native, kv_offloading_size_gib: 1}}
workload:
  classes: [{name: c, weight: 1, prompt_tokens: {min: 100, max: 200}, output_tokens: {min: 4, max: 8}}]
steps:
  levels:
    - {concurrency: 4, duration_s: 20, expected_rps: 2}
    - {concurrency: 16, duration_s: 60, expected_rps: 20}
slo: {ttft_p99_ms: 2000}
rules:
  window_s: 10
  budgets: [{metric: ttft}]
  regression: [{metric: ttft, percentile: 99, max_ratio: 1.1}]
"""


def scenario(text: str = SCENARIO):  # type: ignore[no-untyped-def]
    return load_scenario_text(text, "power.yaml")


def test_declared_rates_give_requests_percentiles_and_rule_resolution() -> None:
    power = plan_power(scenario())
    s0, s1 = power.steps
    assert (s0.source, s0.expected_requests, s1.expected_requests) == ("declared", 40, 1200)
    assert [p.resolved for p in s0.percentiles] == [True, False, False]  # 40 requests: p50 only, not p99
    assert [p.resolved for p in s1.percentiles] == [True, True, True]
    reg0, reg1 = (next(r for r in s.rules if r.kind == "regression") for s in (s0, s1))
    # regression: one-sided 0.05 / 2 steps = 0.025, read off a 95% two-sided interval
    assert reg0.alpha_each == pytest.approx(0.025) and reg0.confidence == pytest.approx(0.95)
    assert reg0.needed == 368 and reg0.resolved is False and reg0.duration_needed_s == 185.0
    assert reg0.lower_percentile == 90.0 and reg0.detectable_ratio is None
    assert reg1.resolved is True and reg1.detectable_ratio is not None and reg1.detectable_ratio > 1.1
    assert reg1.sample_percentiles is not None and reg1.sample_percentiles[0] < 99.0 <= reg1.sample_percentiles[1]
    assert s0.window is not None and s0.window.requests == 20.0 and s0.window.bounds_p99 is False
    assert s1.window is not None and s1.window.requests == 200.0 and s1.window.needed_p99 == 368
    assert power.sigma_source.startswith("default 0.5") and "lognormal" in power.assumption


def test_a_step_that_cannot_resolve_the_rule_percentile_warns_with_the_fix() -> None:
    checks = power_checks(plan_power(scenario()))
    reg = next(c for c in checks if "regression" in c.message)
    assert reg.name == "power" and reg.level == "warn"
    assert "step 0 (c4) expects ~40" in reg.message and "those steps are not judged" in reg.message
    assert "step 0 185 s" in reg.message and "p90" in reg.message
    budget = next(c for c in checks if "budget" in c.message)
    assert budget.level == "ok" and "resolved at step(s) 1 (c16)" in budget.message


def test_no_step_resolving_the_budget_p99_warns() -> None:
    text = SCENARIO.replace("duration_s: 60, expected_rps: 20", "duration_s: 10, expected_rps: 3")
    checks = power_checks(plan_power(scenario(text)))
    budget = next(c for c in checks if "budget" in c.message)
    assert budget.level == "warn" and "no step can resolve it" in budget.message and "step 1 125 s" in budget.message
    reg = next(c for c in checks if "regression" in c.message)
    assert "no step can judge it" in reg.message


def test_expected_rps_is_validated() -> None:
    with pytest.raises(ScenarioError, match="expected_rps"):
        scenario(SCENARIO.replace("expected_rps: 2", "expected_rps: 0"))


def test_offered_rate_and_request_bounds_and_unknown() -> None:
    text = SCENARIO.replace("{concurrency: 4, duration_s: 20, expected_rps: 2}", "{rate_rps: 5, duration_s: 20}")
    text = text.replace("{concurrency: 16, duration_s: 60, expected_rps: 20}", "{rate_rps: 10, requests: 500}")
    s0, s1 = plan_power(scenario(text)).steps
    assert (s0.source, s0.expected_requests, s1.expected_requests) == ("offered", 100, 500)  # 500: its bound
    unknown = plan_power(scenario(SCENARIO.replace(", expected_rps: 20", "").replace(", expected_rps: 2", "")))
    assert not unknown.known and all(s.expected_requests is None for s in unknown.steps)
    assert unknown.how_to_estimate is not None and "--calibrate" in unknown.how_to_estimate
    assert power_checks(unknown) == []  # nothing to warn about: the section says the estimate is unknown


def test_from_run_reads_the_fixture_summary() -> None:
    measured = read_run(RUNS / "demo-sim")
    # the slowest arm at each level: cpu ended c16 early (475 requests in 38 s)
    assert measured.by_label["c16"].rps == pytest.approx(475 / 38, abs=1e-3)
    assert measured.by_label["c4"].rps == pytest.approx(216 / 60, abs=1e-3)
    assert set(measured.sigma) == {"ttft", "itl", "e2e"} and 0 < measured.sigma["ttft"] < 3
    text = SCENARIO.replace(", expected_rps: 20", "").replace(", expected_rps: 2", "")
    power = plan_power(scenario(text), PowerInput(measured=measured))
    s0, s1 = power.steps
    assert s0.source == "measured" and s0.expected_requests == int(216 / 60 * 20)
    assert s1.source == "measured" and s1.expected_requests == int(475 / 38 * 60)
    assert power.sigma_source.startswith("measured") and power.sigma["ttft"] == measured.sigma["ttft"]
    declared = plan_power(scenario(), PowerInput(measured=measured, sigma=0.3))
    assert declared.steps[0].source == "declared" and declared.sigma["ttft"] == 0.3  # declared comes first


def test_from_run_prefers_the_step_journal(tmp_path: Path) -> None:
    lines = [{"arm": "baseline", "step": -1, "label": "c4", "warmup": True, "start_ns": 0, "end_ns": 10**9,
              "requests": 99, "errors": 0},
             {"arm": "baseline", "step": 0, "label": "c4", "start_ns": 0, "end_ns": 20 * 10**9, "requests": 110,
              "errors": 10},
             {"arm": "cpu", "step": 0, "label": "c4", "start_ns": 0, "end_ns": 20 * 10**9, "requests": 200,
              "errors": 0},
             {"arm": "cpu", "step": -2, "label": "drill", "drill": "restart", "start_ns": 0, "end_ns": 10**9,
              "requests": 5, "errors": 0}]
    (tmp_path / "steps.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines) + '{"torn', encoding="utf-8")
    measured = read_run(tmp_path)
    assert list(measured.by_label) == ["c4"] and measured.by_label["c4"].rps == 5.0  # (110 - 10) / 20 s
    assert "baseline" in measured.by_label["c4"].detail and measured.sigma == {}


@pytest.mark.parametrize("make, match", [
    (lambda p: p / "absent", "no such directory"),
    (lambda p: p, "neither steps.jsonl nor summary.json"),
])
def test_from_run_bad_directories(tmp_path: Path, make, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(PowerInputError, match=match):
        read_run(make(tmp_path))


def test_from_run_broken_summary(tmp_path: Path) -> None:
    (tmp_path / "summary.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(PowerInputError, match=r"summary\.json cannot be read"):
        read_run(tmp_path)
    (tmp_path / "summary.json").write_text('{"arms": []}', encoding="utf-8")
    with pytest.raises(PowerInputError, match="no measured step"):
        read_run(tmp_path)


def test_plan_shows_the_power_section_and_json() -> None:
    plan = build_plan(scenario(), host=HOST)
    assert plan.power is not None and plan.ok
    assert any(c.name == "power" and c.level == "warn" for c in plan.checks)
    out = io.StringIO()
    print_plan(plan, Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    assert "Power (before the run" in text and "step 0 (c4): ~2 req/s (declared" in text
    assert "p99 no (needs 368)" in text and "assumption (detectable ratios only): lognormal" in text
    data = json.loads(plan.model_dump_json())
    assert data["power"]["steps"][1]["expected_requests"] == 1200


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["plan", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("extra, match", [
    (["--from-run", "/nonexistent/run"], "--from-run /nonexistent/run: no such directory"),
    (["--sigma", "0"], "--sigma 0: give the lognormal spread"),
    (["--calibrate-s", "3"], "--calibrate-s only applies with --calibrate"),
    (["--calibrate", "--calibrate-s", "500"], "--calibrate-s 500"),
])
def test_cli_bad_power_input_exits_2(extra: list[str], match: str) -> None:
    code, out, err = cli(str(ROOT / "scenarios" / "demo-sim.yaml"), *extra)
    assert code == 2 and match in " ".join(err.split()) and "Traceback" not in out + err


def test_cli_calibrate_needs_the_simulator() -> None:
    code, _out, err = cli(str(ROOT / "scenarios" / "vllm-cpu-pilot.yaml"), "--calibrate")
    assert code == 2 and "needs engine.kind: sim" in " ".join(err.split())


def test_cli_from_run_json() -> None:
    code, out, err = cli(str(ROOT / "scenarios" / "demo-sim.yaml"), "--json", "--from-run", str(RUNS / "demo-sim"))
    assert code in (0, 2), err
    power = json.loads(out)["power"]
    assert any(s["source"] == "measured" for s in power["steps"]) and power["sigma_source"].startswith("measured")


def test_a_dry_run_rule_is_reported_but_never_warned_about() -> None:
    text = SCENARIO.replace("duration_s: 60, expected_rps: 20", "duration_s: 10, expected_rps: 3").replace(
        "max_ratio: 1.1}]", "max_ratio: 1.1, dry_run: true}]")
    power = plan_power(scenario(text))
    assert any(r.kind == "regression" and not r.deciding for r in power.steps[0].rules)
    assert not any("regression" in c.message for c in power_checks(power))
