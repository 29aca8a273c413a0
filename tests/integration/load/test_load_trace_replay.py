"""Mooncake trace replay against the simulator: its prefix hits are exactly the sharing the hash_ids imply."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from load_it_helpers import big_kv_profile, mooncake_trace, shared_blocks, step_run

from harness.config.steps import StepLevel
from harness.config.workload import WorkloadSpec
from harness.load import prewarm_runner, run_step
from harness.rundir.parts import build_requests_parquet
from harness.sim.groundtruth import read_ground_truth
from harness.workload.tokens import calibrate_tokenizer
from tests.support.sim import SimHandle, running_sim

N = 40


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SimHandle, Path]]:
    tmp = tmp_path_factory.mktemp("trace")
    prewarm_runner()
    with running_sim(profile_file=big_kv_profile(tmp), time_scale=0.05, ground_truth=tmp / "truth.jsonl") as handle:
        yield handle, tmp


def write_trace(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_closed_loop_replay_keeps_the_prefix_sharing(sim: tuple[SimHandle, Path]) -> None:
    handle, tmp = sim
    rows = mooncake_trace(N, seed=7)
    workload = WorkloadSpec.model_validate({"seed": 1, "api": "completions", "trace": {
        "path": str(write_trace(tmp / "trace.jsonl", rows)), "mode": "closed_loop"}})
    calib = calibrate_tokenizer(handle.base_url, "sim-model", 10.0)
    out = run_step(step_run(handle.base_url, tmp / "records" / "a", StepLevel(concurrency=1, requests=N), 0,
                            workload=workload, calibration=calib))
    assert out.error is None and out.requests == N and out.errors == 0
    records = sorted(pq.read_table(build_requests_parquet(tmp)).to_pylist(), key=lambda r: r["send_ns"])
    truth = {t["request_id"]: t for t in read_ground_truth(tmp / "truth.jsonl")}
    expected = [b * 512 for b in shared_blocks(rows)]
    assert sum(expected) > 20 * 512  # the trace does share prefixes
    got = []
    for rec, row in zip(records, rows, strict=True):
        gt = truth[rec["response_id"]]
        assert rec["prompt_tokens"] == gt["prompt_tokens"] == row["input_length"]
        got.append(gt["gpu_hit_tokens"] + gt["cpu_hit_tokens"] + gt["disk_hit_tokens"])
        assert rec["cached_tokens"] == got[-1]
    assert got == expected


def test_timestamp_replay_sends_on_schedule(sim: tuple[SimHandle, Path]) -> None:
    handle, tmp = sim
    rows = [{"timestamp": 400 * i, "input_length": 300, "output_length": 2, "hash_ids": [i]} for i in range(6)]
    workload = WorkloadSpec.model_validate({"api": "completions", "trace": {
        "path": str(write_trace(tmp / "paced.jsonl", rows)), "speed": 2.0}})
    out = run_step(step_run(handle.base_url, tmp / "records" / "b", StepLevel(concurrency=1, duration_s=5), 1,
                            workload=workload))
    assert out.error is None and out.requests == 6
    recs = sorted(pq.read_table(build_requests_parquet(tmp)).to_pylist(), key=lambda r: r["send_ns"])
    recs = [r for r in recs if r["step"] == 1]
    t0 = recs[0]["planned_send_ns"]
    for i, rec in enumerate(recs):
        assert rec["planned_send_ns"] - t0 == pytest.approx(i * 0.2e9, abs=1e3)  # 400 ms at speed 2
        assert 0 <= rec["send_ns"] - rec["planned_send_ns"] < 50e6
