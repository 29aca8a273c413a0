"""A real step against the simulator: every record carries the first token's arrival, its parse time and how the
arrival was taken; the step's client health reads the delay back from the records and flags a step over budget."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
from load_it_helpers import step_run

from harness.analysis import derive_latencies, load_requests, step_table
from harness.config.rules import SloSpec
from harness.config.steps import StepLevel
from harness.load import run_step
from harness.load.lines import KERNEL_STAMPS
from harness.load.runners import prewarm_runner
from harness.rundir.parts import build_requests_parquet
from harness.sim.groundtruth import read_ground_truth
from harness.workload.tokens import calibrate_tokenizer
from tests.support.sim import running_sim


def test_records_carry_arrival_and_parse_times_and_a_step_over_budget_is_flagged(tmp_path: Path) -> None:
    prewarm_runner()
    records = tmp_path / "records" / "gpu-only"
    with running_sim(profile="demo", time_scale=0.2, ground_truth=tmp_path / "truth.jsonl") as sim:
        calib = calibrate_tokenizer(sim.base_url, "sim-model", 10.0)
        level = StepLevel(concurrency=4, requests=12)
        within = run_step(step_run(sim.base_url, records, level, 0, calibration=calib))
        over = run_step(step_run(sim.base_url, records, level, 1, calibration=calib, first_token_delay_p99_ms=0.0))
    assert within.error is None and over.error is None and within.requests == over.requests == 12
    for outcome in (within, over):
        delay = outcome.first_token_delay_ms
        assert delay is not None and delay.count == 12 and delay.p99 is not None and delay.p99 >= 0
    assert over.client.saturated and "first tokens waited in the client" in (over.client.note or "")
    assert "(limit 0 ms)" in (over.client.note or "")
    rows = pq.read_table(build_requests_parquet(tmp_path)).to_pylist()
    truth = {r["request_id"]: r for r in read_ground_truth(tmp_path / "truth.jsonl")}
    assert len(rows) == 24
    sources = [r["first_token_source"] for r in rows]
    if KERNEL_STAMPS:  # a wall-clock step makes a stamp unconvertible: that read falls back to "readable"
        assert set(sources) <= {"kernel", "readable"} and sources.count("kernel") >= len(rows) - 2, sources
    else:
        assert set(sources) == {"readable"}
    for r in rows:
        assert r["send_ns"] < r["first_byte_ns"] <= r["first_token_ns"] <= r["first_token_parsed_ns"] < r["end_ns"]
        assert r["chunk_ns"][0] == r["first_token_ns"]
        sent = truth[r["response_id"]]["first_token_sent_ns"]
        assert r["first_token_ns"] >= sent - 100_000  # never before the simulator handed the token to its socket
    df = derive_latencies(load_requests(tmp_path))
    steps = step_table(df, SloSpec())
    assert [s.first_token_delay_ms.count if s.first_token_delay_ms else 0 for s in steps] == [12, 12]
