"""Pieces of ``make perf``: bench output parsers, statistics, CPU interpolation, py-spy summary, peer command."""

from __future__ import annotations

import itertools
import json
import math
import os
import time
from pathlib import Path

import numpy as np
import pytest

from tools.perf import benches
from tools.perf.capacity import CapacityOptions
from tools.perf.model import ClientRun, Workload, burst_split, percentile, ttft_errors
from tools.perf.peer_vllm import PeerSetup, command
from tools.perf.procs import TreeCpuSampler, cpu_plan, interpolate
from tools.perf.profile import OTHER, summarise
from tools.perf.tokenizer import tokenizer_json

# Real outputs of the benches (``make perf`` parses them), long lines joined with "+".
TRACE_OUT = (
    "synthesised 1,000,000 requests: 38.7 s wall (13.8 s CPU)\n"
    "analysis (in memory): 1,000,000 requests, 31,782,448 blocks (31.8 per request), 12,670,459 unique: "
    + "22.6 s wall (12.8 s CPU)\n"
    "  hit ratio at 1000: 0.3150, 10000: 0.4344, 50000: 0.4894; infinite cache 0.6013\n"
    "  goal < 60 s: met\n"
    "wrote 307 MiB of JSONL: 15.1 s wall (8.3 s CPU)\n"
    "read JSONL: 10.1 s wall (7.6 s CPU)\n"
    "analysis (from file): 1,000,000 requests, 31,782,448 blocks (31.8 per request), 12,670,459 unique: "
    + "14.4 s wall (13.9 s CPU)\n"
    "  end to end (read + analyse): 24.5 s wall\n")
SIM_OUT = (
    "simulator pid 1 on cpu 0; load generator on cpu 1\n"
    "concurrency   64:     91231 streamed tokens/s, simulator CPU  58.8% of its core ->    155226 tokens per "
    + "simulator CPU-second (load generator CPU  24.5%)\n"
    "concurrency  256:     83141 streamed tokens/s, simulator CPU  70.6% of its core ->    117758 tokens per "
    + "simulator CPU-second (load generator CPU  27.5%)\n"
    "best: 91231 streamed tokens/s with the simulator on one core\n")


def test_bench_parsers_read_real_outputs() -> None:
    analysis = benches.parse_analysis('noise\n{"load_s": 3.2, "analysis_total_s": 11.4, "analysis_cpu_s": 13.1}\n')
    assert analysis["analysis_total_s"] == pytest.approx(11.4)
    trace = benches.parse_trace(TRACE_OUT)
    assert trace == {"analysis_s": 22.6, "analysis_cpu_s": 12.8, "file_s": 24.5}
    report = benches.parse_report("report render: runs=5 first=2359 ms median=1310 ms max=1480 ms report.html=235 KiB")
    assert report == {"first_ms": 2359.0, "median_ms": 1310.0}
    sim = benches.parse_sim(SIM_OUT)
    assert sim == {"tokens_per_s": 91231.0, "tokens_per_cpu_s": 155226.0}


@pytest.mark.parametrize("parse", [benches.parse_analysis, benches.parse_trace, benches.parse_report,
                                   benches.parse_sim])
def test_bench_parsers_reject_garbage(parse: object) -> None:
    with pytest.raises(benches.BenchOutputError):
        parse("Traceback (most recent call last):\n  boom")  # type: ignore[operator]


def test_failed_bench_gives_rows_with_reason() -> None:
    run = benches.BenchRun(["x"], 1, "line\nValueError: bad", 0.5)
    assert run.failure is not None and "exit status 1" in run.failure and "bad" in run.failure
    assert benches.BenchRun(["x"], None, "", 301.0).failure == "timed out after 301 s"
    rows = benches._rows(run, benches.parse_analysis, "3 analysis", [("f", benches.ANALYSIS_GOAL)], "t",
                         lambda t: [])
    assert len(rows) == 1 and rows[0].passed is False and rows[0].error == run.failure


def test_percentile_matches_numpy() -> None:
    data = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0]
    for q in (0, 25, 50, 90, 99, 100):
        assert percentile(data, q) == pytest.approx(float(np.percentile(data, q)))
    assert math.isnan(percentile([], 50))
    with pytest.raises(ValueError, match=r"0\.\.100"):
        percentile(data, 101)


def test_ttft_errors_join_on_response_id() -> None:
    errs, sent = ttft_errors({"a": 1_500_000, "b": 3_000_000, "c": 10}, {"a": 1_000_000, "b": 4_000_000})
    assert sorted(errs) == [0.5, 1.0] and sorted(sent) == [1_000_000, 4_000_000]


def test_burst_split_separates_crowded_first_tokens() -> None:
    sent = [i * 10_000 for i in range(20)] + [10**9, 2 * 10**9]  # 20 within 0.2 ms, then two alone
    errs = [1.0] * 20 + [9.0, 8.0]
    split = burst_split(errs, sent, window_ms=2.0, burst_size=16)
    assert split.in_bursts == [1.0] * 20 and sorted(split.others) == [8.0, 9.0]
    with pytest.raises(ValueError, match="pair"):
        burst_split([1.0], [])


def test_workload_and_run_figures() -> None:
    with pytest.raises(ValueError, match="positive"):
        Workload(0, 10)
    w = CapacityOptions(tokens_per_run=400_000, output_tokens=256).workload(64)
    assert w.requests % 64 == 0 and w.requests * 256 >= 400_000
    run = ClientRun("t", w, completed=10, errors=0, tokens=50_000, window_s=2.0, cpu_s=1.0)
    assert run.tokens_per_s == 25_000 and run.cpu_s_per_1k_tokens == pytest.approx(0.02)
    assert run.tokens_per_cpu_s == 50_000


def test_interpolate_is_linear_and_clamped() -> None:
    times, values = [0, 10, 20], [0.0, 1.0, 3.0]
    assert interpolate(times, values, 5) == pytest.approx(0.5)
    assert interpolate(times, values, 15) == pytest.approx(2.0)
    assert interpolate(times, values, -5) == 0.0 and interpolate(times, values, 99) == 3.0
    with pytest.raises(ValueError, match="no CPU samples"):
        interpolate([], [], 1)


def test_sampler_sees_this_process_burn_cpu() -> None:
    sampler = TreeCpuSampler(os.getpid(), interval_s=0.01, max_s=5.0).start()
    start = time.perf_counter_ns()
    while time.perf_counter_ns() - start < 200_000_000:  # 0.2 s busy
        pass
    end = time.perf_counter_ns()
    sampler.stop()
    assert 0.05 < sampler.cpu_between(start, end) < 1.0
    waited = sampler.wait_between(start, end)
    assert waited is None or 0 <= waited < 1.0


def test_cpu_plan_splits_cores() -> None:
    plan = cpu_plan(boost=False)
    assert plan.nice is None
    if len(os.sched_getaffinity(0)) >= 2:
        assert plan.server and plan.client and not plan.server & plan.client


def test_profile_summary_attributes_samples() -> None:
    raw = ("process 1;run (locust/user/users.py:1);_read_stream (harness/load/client.py:161);"
           "feed_line (harness/load/sse.py:79);loads (json/__init__.py:346) 6\n"
           "thread 2;run (locust/user/users.py:1);feed_line (harness/load/sse.py:79) 3\n"
           "main (x.py:1) 1\n\ngarbage\n")
    summary = summarise(raw)
    assert summary.samples == 10
    parts = dict(summary.parts)
    assert parts["JSON decoding (json.loads per SSE event)"] == 6
    assert parts["SSE parsing (harness/load/sse.py)"] == 3 and parts[OTHER] == 1
    assert summary.top_self[0] == ("loads (json/__init__.py:346)", 6)
    assert any("60.0%" in line for line in summary.lines())


def test_peer_command_runs_the_same_workload() -> None:
    cmd = command(PeerSetup(python=Path(os.devnull)), "http://127.0.0.1:9", Workload(64, 640, 128, 256),
                  tokenizer=Path("/tok"), out_dir=Path("/out"))
    args = dict(itertools.pairwise(cmd))
    assert args["--max-concurrency"] == "64" and args["--num-prompts"] == "640"
    assert args["--random-input-len"] == "128" and args["--random-output-len"] == "256"
    assert "--ignore-eos" in cmd and "--save-detailed" in cmd and args["--endpoint"] == "/v1/completions"


def test_word_tokenizer_counts_words() -> None:
    doc = tokenizer_json(words=5)
    vocab = doc["model"]["vocab"]
    assert doc["model"]["type"] == "WordLevel" and doc["pre_tokenizer"]["type"] == "WhitespaceSplit"
    assert len(vocab) == 6 and vocab["<unk>"] == 0 and vocab["w5"] == 5
    json.dumps(doc)  # serialisable as tokenizer.json


@pytest.mark.parametrize("argv", [["--repeats", "0"], ["--levels", "0"], ["--tokens-per-run", "5"],
                                  ["--records", "0"], ["--skip", "everything"], ["--peer-python", "/nonexistent/py"]])
def test_cli_rejects_bad_arguments(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from tools.perf.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "error:" in capsys.readouterr().err
