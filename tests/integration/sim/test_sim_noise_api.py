"""The noise flags over a real socket: ``GET /admin/state`` shows the draw; off by default."""

from __future__ import annotations

import httpx

from harness.sim.noise import Noise
from harness.sim.noise_spec import NoiseSpec
from tests.support.sim import running_sim

FAST = 0.02


def _complete(base_url: str) -> None:
    resp = httpx.post(base_url + "/v1/completions", timeout=30,
                      json={"model": "sim-model", "prompt": "a b c d e f g h " * 40, "max_tokens": 8})
    assert resp.status_code == 200, resp.text


def test_noise_is_off_by_default() -> None:
    with running_sim(in_process=True, profile="demo", time_scale=FAST) as sim:
        _complete(sim.base_url)
        state = httpx.get(sim.base_url + "/admin/state").json()
    assert state["noise"] is None


def test_noise_flags_reach_the_engine_and_are_reported() -> None:
    with running_sim(in_process=True, profile="demo", time_scale=FAST, noise_seed=77, step_jitter=0.1,
                     run_drift=0.05, drift_per_hour=0.2) as sim:
        _complete(sim.base_url)
        noise = httpx.get(sim.base_url + "/admin/state").json()["noise"]
    expected = Noise(NoiseSpec(seed=77, step_jitter=0.1, run_drift=0.05, drift_per_hour=0.2)).run_factor
    assert noise["run_factor"] == expected != 1.0
    assert noise["seed"] == 77 and noise["step_jitter"] == 0.1 and noise["mean_corrected"] is True
    assert noise["jittered_steps"] >= 8  # one prefill step and one per output token at least
