"""harness compare: B/A ratio intervals from both runs' requests.parquet on the steps' steady states, paired by plan
key only in open-loop steps that served the same requests; summaries otherwise."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import typer
from typer.testing import CliRunner

from harness.report.commands import compare_command
from harness.report.compare import comparison_lines
from harness.report.compare_ratios import compare_runs, plan_keys
from harness.rundir.entries import StepEntry
from harness.rundir.journal import append_step
from harness.rundir.layout import RunDir
from harness.rundir.records import SCHEMA, RequestRecord
from tests.support.sample import write_sample_run

N = 420  # enough requests for a resolved p99 at 95% (368)


def _records(arm: str, step: int, scale: float, seed: int, rate: float | None = None) -> list[dict[str, object]]:
    rng = np.random.default_rng(seed)
    base = rng.lognormal(np.log(300.0), 0.5, N)  # the same plan (and prompt) per key in both runs
    noise = np.random.default_rng(seed + 1000).lognormal(0.0, 0.05, N)
    rows = []
    for k in range(N):
        send = 1_000_000_000 + k * 50_000_000
        first = send + int(base[k] * noise[k] * scale * 1e6)
        chunks = [first + j * int(20e6 * scale) for j in range(8)]
        rows.append(RequestRecord(
            arm=arm, step=step, step_label=f"c{step}", concurrency=None if rate else 4, rate_rps=rate, user=k % 4,
            request_id=f"{arm}/s{step}/u{k % 4}-r{k}", request_class="short", prefix_family=None, session_id=None,
            turn=None, api="chat", planned_send_ns=send, send_ns=send, send_wall_ns=send, first_byte_ns=first,
            first_token_ns=first, end_ns=chunks[-1], chunk_ns=chunks, output_tokens=8).to_row())
    return rows


def _run(path: Path, scale: float, rate: float | None = None) -> Path:
    run = write_sample_run(path)
    rows = [r for step in range(3) for r in _records("cpu", step, scale, seed=step, rate=rate)]
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), RunDir(run).requests)
    for step in range(3):  # the journaled spans hold every request (the rows that count are those inside)
        append_step(RunDir(run), StepEntry(arm="cpu", step=step, label=f"c{step}", start_ns=1_000_000_000,
                                           end_ns=1_000_000_000 + N * 50_000_000))
    return run


def test_plan_key_is_the_request_id_after_arm_and_step_tag() -> None:
    import pandas as pd

    frame = pd.DataFrame({"arm": ["cpu", "a/b"], "request_id": ["cpu/s1/u0-r3", "a/b/s0-cache_loss/k/9"]})
    assert plan_keys(frame).tolist() == ["u0-r3", "k/9"]


def test_compare_runs_pairs_open_loop_steps_that_served_the_same_requests(tmp_path: Path) -> None:
    cmp = compare_runs(_run(tmp_path / "a", 1.0, rate=20.0), _run(tmp_path / "b", 1.5, rate=20.0))
    assert "requests.parquet" in cmp.ratio_source and "steady state" in cmp.ratio_source
    cpu = next(arm for arm in cmp.arms if arm.name == "cpu")
    ttft = cpu.steps[2].ttft_p99_ms.interval
    assert ttft is not None and ttft.resolved and ttft.lo is not None and ttft.hi is not None
    assert 1.3 < ttft.lo < 1.5 < ttft.hi < 1.7  # B was 1.5x slower, request by request
    assert "paired by request" in ttft.method and ttft.paired and ttft.n == ttft.n_versus == N
    itl = cpu.steps[2].itl_p99_ms.interval
    assert itl is not None and itl.resolved and itl.lo is not None and itl.lo > 1.0
    tps = cpu.steps[2].output_tokens_per_s.interval
    assert tps is not None and tps.resolved
    baseline = next(arm for arm in cmp.arms if arm.name == "gpu-only")  # no requests recorded for it here
    c4 = baseline.steps[0].ttft_p99_ms
    assert c4.interval is None and c4.unresolved  # the summaries' figures alone; their c4 p99s are unresolved
    assert cpu.steps[0].ttft_p99_ms.interval is not None
    lines = comparison_lines(cmp)
    assert any(line.startswith("    p99 TTFT ") and "(B/A 1.5" in line and line.endswith("]) *") for line in lines)


def test_compare_runs_never_pairs_closed_loop_steps(tmp_path: Path) -> None:
    """Closed-loop steps are compared unpaired even when every plan key matches: a faster run would get further
    down the plan, so pairs would be its first requests. The interval is wider than the paired one, and still holds
    the true 1.5x."""
    cmp = compare_runs(_run(tmp_path / "a", 1.0), _run(tmp_path / "b", 1.5))
    ttft = next(arm for arm in cmp.arms if arm.name == "cpu").steps[2].ttft_p99_ms.interval
    assert ttft is not None and ttft.resolved and ttft.lo is not None and ttft.hi is not None
    assert not ttft.paired and "independently" in ttft.method and (ttft.n, ttft.n_versus) == (N, N)
    assert ttft.lo < 1.5 < ttft.hi and ttft.hi / ttft.lo > 1.3


def test_compare_without_parquet_says_so(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", 1.0)
    b = write_sample_run(tmp_path / "b")
    cmp = compare_runs(a, b)
    assert cmp.ratio_source.startswith("summaries only (") and "requests.parquet missing" in cmp.ratio_source
    assert all(s.ttft_p99_ms.interval is None for arm in cmp.arms for s in arm.steps)
    app = typer.Typer()
    app.command()(compare_command)
    result = CliRunner().invoke(app, [str(a), str(b)])
    assert result.exit_code == 0, result.output
    assert "ratio intervals: summaries only" in result.output
