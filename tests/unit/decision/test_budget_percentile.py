"""A budget rule is judged at its own percentile: the windows' p95 for a p95 rule (not their p99), the steps' p95 in
the per-step fallback, the rule's message naming p95; the windows keep only the percentiles their rules read."""

from __future__ import annotations

import json

import pytest

from harness.config import load_scenario_text
from harness.decision.evaluate import budget_results
from harness.schema.intervals import Percentiles, QuantileCI
from harness.schema.summary import StepSummary
from harness.schema.windows import WindowPoint, WindowQuantile

SCENARIO = """
name: p95
engine: {kind: sim, model: m, launcher: process}
arms: [{name: baseline, tier: gpu-only}]
workload:
  classes: [{name: c, weight: 1, prompt_tokens: {min: 100, max: 200}, output_tokens: {min: 4, max: 8}}]
steps: {levels: [{concurrency: 4, duration_s: 50}]}
slo: {ttft_p99_ms: 2000}
rules:
  window_s: 10
  budgets: BUDGETS
"""


def _scenario(budgets: str):  # type: ignore[no-untyped-def]
    return load_scenario_text(SCENARIO.replace("BUDGETS", budgets), "p95.yaml")


def _ci(lo: float, hi: float, n: int = 400) -> QuantileCI:
    return QuantileCI(lo=lo, hi=hi, resolved=True, n=n)


def _window(i: int, p99: tuple[float, float, float], p95: tuple[float, float, float]) -> WindowPoint:
    return WindowPoint(step=0, start_s=10.0 * i, end_s=10.0 * (i + 1), requests=400, ttft_p99_ms=p99[0],
                       ttft_p99_ci=_ci(p99[1], p99[2]),
                       percentiles={"ttft_p95": WindowQuantile(value_ms=p95[0], ci=_ci(p95[1], p95[2])),
                                    "ttft_p50": WindowQuantile(value_ms=40.0, ci=_ci(38.0, 42.0)),
                                    "itl_p95": WindowQuantile(value_ms=9.0, ci=_ci(8.0, 10.0))})


# p99 far above a 1000 ms budget in every window, p95 well within it.
WINDOWS = [_window(i, (1500.0, 1400.0, 1600.0), (600.0, 550.0, 650.0)) for i in range(5)]


def test_a_p95_budget_is_judged_on_the_windows_p95_not_their_p99() -> None:
    scenario = _scenario("[{metric: ttft, percentile: 95, budget_ms: 1000}]")
    results, marked = budget_results(scenario, scenario.arms[0], WINDOWS, [])
    (result,) = results
    assert (result.rule, result.status) == ("ttft-p95-budget", "pass")
    assert result.message.startswith("p95 TTFT stayed within 1000 ms") and "worst window 600 ms" in result.message
    assert not any(w.breached for w in marked)


def test_the_same_windows_breach_a_p99_budget() -> None:
    scenario = _scenario("[{metric: ttft, percentile: 99, budget_ms: 1000}]")
    results, marked = budget_results(scenario, scenario.arms[0], WINDOWS, [])
    assert results[0].status == "breach" and results[0].message.startswith("p99 TTFT broke its 1000 ms budget")
    assert all(w.breached == ["ttft-p99-budget"] for w in marked)
    assert all(not w.percentiles for w in marked)  # no rule read another percentile: none kept
    assert '"percentiles"' not in json.dumps(marked[0].model_dump(mode="json"))  # the summary reads as before


def test_windows_keep_only_the_percentiles_their_rules_read() -> None:
    scenario = _scenario("[{metric: ttft, percentile: 95, budget_ms: 1000}, {metric: ttft}]")
    _, marked = budget_results(scenario, scenario.arms[0], WINDOWS, [])
    assert all(set(w.percentiles) == {"ttft_p95"} for w in marked)
    assert marked[0].ttft_p99_ms == 1500.0  # p99 stays for the timeline chart


def _step(p95: float, p95_ci: tuple[float, float], p99: float, p99_ci: tuple[float, float]) -> StepSummary:
    perc = Percentiles(p95=p95, p95_ci=_ci(*p95_ci, n=100), p99=p99, p99_ci=_ci(*p99_ci, n=100), count=100)
    return StepSummary(index=0, label="c4", duration_s=50.0, requests=100, ttft_ms=perc)


def test_the_per_step_fallback_reads_the_steps_p95() -> None:
    scenario = _scenario("[{metric: ttft, percentile: 95, budget_ms: 1000}]")
    few = [w.model_copy(update={"requests": 2}) for w in WINDOWS]  # below min_requests_per_window: unresolved
    steps = [_step(700.0, (650.0, 760.0), 1400.0, (1300.0, 1500.0))]
    results, marked = budget_results(scenario, scenario.arms[0], few, steps)
    assert results[0].status == "pass", results[0].message
    assert "p95 TTFT within 1000 ms at every step" in results[0].message and "700 ms" in results[0].message
    assert all(w.unresolved == ["ttft-p95-budget"] for w in marked)
    at_p99 = _scenario("[{metric: ttft, percentile: 99, budget_ms: 1000}]")
    assert budget_results(at_p99, at_p99.arms[0], few, steps)[0][0].status == "breach"  # the step's p99 is over


def test_windows_without_the_rules_percentile_are_an_error_not_a_silent_unresolved() -> None:
    scenario = _scenario("[{metric: itl, percentile: 50, budget_ms: 100}]")
    with pytest.raises(LookupError, match="windows carry no p50 ITL"):
        budget_results(scenario, scenario.arms[0], WINDOWS, [])
