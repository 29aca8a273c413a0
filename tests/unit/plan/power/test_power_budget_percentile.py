"""A budget rule at p95 in the power section of ``harness plan``: listed and resolved at p95 (not dropped, not read
at p99), its window bound at p95; through the CLI, a percentile no window computes exits 2 naming the field."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from harness.cli import app
from harness.config import load_scenario_text
from harness.plan.power import plan_power, power_checks
from harness.plan.power.view import print_power

SCENARIO = """
name: power-p95
engine: {kind: sim, model: m, launcher: process}
arms:
  - {name: baseline, tier: gpu-only}
  - {name: cpu, tier: cpu, offload: {kind: vllm-native, kv_offloading_size_gib: 1}}
workload:
  classes: [{name: c, weight: 1, prompt_tokens: {min: 100, max: 200}, output_tokens: {min: 4, max: 8}}]
steps:
  levels:
    - {concurrency: 4, duration_s: 20, expected_rps: 2}
    - {concurrency: 16, duration_s: 60, expected_rps: 10}
slo: {ttft_p99_ms: 2000}
rules:
  window_s: 10
  budgets: [{metric: ttft, percentile: PCT, budget_ms: 1500, critical: true}]
"""


def _power(pct: str = "95"):  # type: ignore[no-untyped-def]
    return plan_power(load_scenario_text(SCENARIO.replace("PCT", pct), "p95.yaml"))


def test_a_p95_budget_is_listed_and_resolved_at_p95() -> None:
    s0, s1 = _power().steps
    b0, b1 = (next(r for r in s.rules if r.kind == "budget") for s in (s0, s1))
    assert (b0.rule, b0.measure, b0.percentile) == ("ttft-p95-budget", "p95 TTFT", 95.0)
    assert b0.needed == 72  # p95 at 95%; a p99 would need 368
    assert (s0.expected_requests, b0.resolved) == (40, False)
    assert (s1.expected_requests, b1.resolved) == (600, True)  # 600 requests resolve p95 (and also p99)


def test_the_window_line_and_the_check_use_the_budgets_percentile() -> None:
    power = _power()
    window = power.steps[1].window
    assert window is not None and window.requests == 100.0
    bound = window.bound(95.0)
    assert bound is not None and (bound.needed, bound.bounds) == (72, True)
    assert (window.needed_p99, window.bounds_p99) == (368, False)  # p99 is still there for --json readers
    check = next(c for c in power_checks(power) if "ttft-p95-budget" in c.message)
    assert check.level == "ok" and "windows can bound it" in check.message  # 100 >= 72 (a p99 would say no)
    out = io.StringIO()
    print_power(power, Console(file=out, width=400))
    text = out.getvalue()
    assert "budget ttft-p95-budget p95 TTFT at 95.0%: 72" in text
    assert "budget window 10 s: ~100 requests; bounding p95 needs 72: yes" in text


def test_a_p99_budget_reads_as_before() -> None:
    power = _power("99")
    window = power.steps[1].window
    assert window is not None and [b.percentile for b in window.percentiles] == [99.0]
    out = io.StringIO()
    print_power(power, Console(file=out, width=400))
    assert "budget window 10 s: ~100 requests; bounding p99 needs 368: no" in out.getvalue()


def _plan(tmp_path: Path, pct: str) -> tuple[int, str]:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.replace("PCT", pct))
    result = CliRunner().invoke(app, ["plan", str(path)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout + result.stderr


def test_harness_plan_shows_a_p95_budget(tmp_path: Path) -> None:
    code, out = _plan(tmp_path, "95")
    assert code == 0, out
    assert "budget ttft-p95-budget p95 TTFT at 95.0%: 72" in out and "Traceback" not in out


def test_harness_plan_refuses_a_percentile_no_window_computes(tmp_path: Path) -> None:
    for pct in ("97.3", "100", "90"):
        code, out = _plan(tmp_path, pct)
        assert code == 2, out
        assert "rules.budgets[0].percentile" in out and "use 50, 95 or 99" in out and "Traceback" not in out
