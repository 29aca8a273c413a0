"""``harness plan --calibrate`` on the simulator: the baseline arm's simulator is started in-process and each level
is driven briefly with the harness's own load path; the rates and spread it measures reach the power section.
Bounded: two levels x 1.5 s at a fast time scale (well under 30 s with the runner's start-up)."""

from __future__ import annotations

import time

import pytest

from harness.config import load_scenario_text
from harness.plan.power import PowerInput, plan_power
from harness.run.calibrate import calibrate, serve_params

SCENARIO = """
name: calibrate
engine: {kind: sim, model: m, launcher: process, sim_profile: demo, sim_time_scale: 0.1, max_model_len: 8192,
         max_num_seqs: 64}
arms:
  - {name: baseline, tier: gpu-only}
  - {name: cpu, tier: cpu, offload: {kind: vllm-native, kv_offloading_size_gib: 4}}
workload:
  seed: 3
  classes: [{name: c, weight: 1, prompt_tokens: {min: 200, max: 600}, output_tokens: {min: 4, max: 12}}]
steps:
  levels: [{concurrency: 2, duration_s: 30}, {concurrency: 8, duration_s: 30}]
  drain_timeout_s: 5
slo: {ttft_p99_ms: 4000}
rules:
  budgets: [{metric: ttft}]
  regression: [{metric: ttft, max_ratio: 1.1}]
"""


def test_serve_params_parse_the_launch_flags_as_the_simulator_does() -> None:
    params = serve_params(["--host", "127.0.0.1", "--port", "0", "--profile", "demo", "--time-scale", "0.5",
                           "--max-num-seqs", "8", "--no-enable-prefix-caching", "--kv-offloading-size", "2"])
    assert params["time_scale"] == 0.5 and params["max_num_seqs"] == 8 and params["kv_offloading_size"] == 2.0
    assert params["enable_prefix_caching"] is False and "port" not in params and "host" not in params


@pytest.mark.timeout(60)
def test_calibrate_measures_every_level_on_the_simulator() -> None:
    scenario = load_scenario_text(SCENARIO, "calibrate.yaml")
    started = time.monotonic()
    said: list[str] = []
    measured = calibrate(scenario, seconds=1.5, say=said.append)
    assert time.monotonic() - started < 30.0
    assert measured.source == "calibrated" and set(measured.by_label) == {"c2", "c8"}
    assert all(r.rps is not None and r.rps > 0 for r in measured.by_label.values())
    assert len(said) == 2 and "baseline at c2" in said[0]
    power = plan_power(scenario, PowerInput(calibrated=measured))
    assert all(s.source == "calibrated" and (s.expected_requests or 0) > 0 for s in power.steps)
    if measured.sigma:
        assert power.sigma_source.startswith("calibrated")
