"""Rising closed-loop steps [1, 4, 16] against the simulator: timed records for every step, and client TTFT
that agrees with the simulator's own first-token send times (the median error is printed)."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from load_it_helpers import step_run

from harness.config.steps import StepLevel
from harness.load import StepOutcome, run_step
from harness.load.runners import prewarm_runner
from harness.rundir.parts import build_requests_parquet
from harness.sim.groundtruth import read_ground_truth
from harness.workload.tokens import calibrate_tokenizer
from tests.support.sim import running_sim

LEVELS = [1, 4, 16]
TTFT_ERROR_LIMIT_MS = 2.0


@dataclass
class StepsRun:
    outcomes: list[StepOutcome]
    rows: list[dict[str, Any]]
    truth: dict[str, dict[str, Any]]


def run_levels(tmp: Path, duration_s: float) -> StepsRun:
    prewarm_runner()  # the load runner imports while the simulator starts
    with running_sim(profile="demo", time_scale=0.2, ground_truth=tmp / "truth.jsonl") as sim:
        calib = calibrate_tokenizer(sim.base_url, "sim-model", 10.0)
        outcomes = [run_step(step_run(sim.base_url, tmp / "records" / "gpu-only",
                                      StepLevel(concurrency=c, duration_s=duration_s), i, calibration=calib))
                    for i, c in enumerate(LEVELS)]
    rows = pq.read_table(build_requests_parquet(tmp)).to_pylist()
    truth = {r["request_id"]: r for r in read_ground_truth(tmp / "truth.jsonl")}
    return StepsRun(outcomes, rows, truth)


@pytest.fixture(scope="module")
def steps_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StepsRun]:
    yield run_levels(tmp_path_factory.mktemp("steps"), duration_s=3.0)


def check_steps(run: StepsRun, duration_s: float) -> None:
    for index, (level, outcome) in enumerate(zip(LEVELS, run.outcomes, strict=True)):
        rows = [r for r in run.rows if r["step"] == index]
        assert outcome.error is None and not outcome.interrupted
        assert outcome.requests == len(rows) >= level
        assert outcome.errors == 0, [r["error_detail"] for r in rows if r["error_kind"]]
        assert {r["user"] for r in rows} == set(range(level))
        assert all(r["concurrency"] == level and r["step_label"] == f"c{level}" for r in rows)
        for r in rows:
            assert r["send_ns"] < r["first_byte_ns"] <= r["first_token_ns"] < r["end_ns"]  # TTFT and end-to-end
            gaps = [b - a for a, b in zip(r["chunk_ns"], r["chunk_ns"][1:], strict=False)]
            assert len(gaps) >= 15 and all(g >= 0 for g in gaps)  # inter-token gaps (16+ output tokens)
            assert r["output_tokens"] == r["output_tokens_target"] == len(r["chunk_ns"])
            assert r["prompt_tokens"] == r["prompt_tokens_target"]  # /tokenize calibration is exact here
            assert r["cached_tokens"] is not None and r["hash_ids"] and r["hash_block_tokens"] == 512
        span_s = (outcome.end_ns - outcome.start_ns) / 1e9
        assert duration_s * 0.9 < span_s < duration_s + 10.0
        assert outcome.client.cpu_percent is not None and outcome.client.send_lag_ms_p50 is not None


def ttft_errors_ms(run: StepsRun, step: int) -> list[float]:
    errors = []
    for r in run.rows:
        gt = run.truth.get(r["response_id"])
        if r["step"] == step and gt and gt.get("first_token_sent_ns"):
            errors.append(abs(r["first_token_ns"] - gt["first_token_sent_ns"]) / 1e6)
    return errors


def test_every_step_has_timed_records(steps_run: StepsRun) -> None:
    check_steps(steps_run, 3.0)


def test_client_ttft_matches_the_simulator_at_16_streams(steps_run: StepsRun) -> None:
    errors = ttft_errors_ms(steps_run, LEVELS.index(16))
    assert len(errors) >= 16
    median = statistics.median(errors)
    print(f"\nTTFT fidelity at 16 concurrent streams: median |client - simulator| = {median:.3f} ms "
          f"over {len(errors)} requests (p90 {statistics.quantiles(errors, n=10)[-1]:.3f} ms)")
    assert median < TTFT_ERROR_LIMIT_MS


@pytest.mark.slow
def test_steps_of_20_seconds(tmp_path: Path) -> None:
    run = run_levels(tmp_path, duration_s=20.0)
    check_steps(run, 20.0)
    errors = ttft_errors_ms(run, LEVELS.index(16))
    print(f"\nTTFT fidelity (20 s steps, 16 streams): median {statistics.median(errors):.3f} ms, n={len(errors)}")
    assert statistics.median(errors) < TTFT_ERROR_LIMIT_MS
