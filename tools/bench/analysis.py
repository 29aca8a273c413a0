"""Benchmark: time to analyse N request records (default 1,000,000, ~64 chunks each) into step tables and windows.

``python -m tools.bench.analysis --records 1000000`` synthesises a realistic requests table (3 arms x 4 steps,
streamed chunk times, errors, cached tokens), writes it as ``requests.parquet`` in a temporary run directory, then
times what ``harness report`` does: load, derive latencies, per-step tables and windows. Goal: under 30 s.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from harness.analysis import analyze_arms, derive_latencies, load_requests
from harness.analysis.load import table_to_frame
from harness.config.rules import SloSpec
from harness.rundir.layout import RunDir
from harness.rundir.records import SCHEMA

ARMS = ("gpu-only", "cpu", "tiered")
STEPS = 4
STEP_S = 300.0
ERROR_KINDS = np.array(["timeout", "http_5xx", "stalled"], dtype=object)


def synth_table(records: int, chunks: int = 64, seed: int = 7) -> pa.Table:
    """A requests table with the record schema: ``records`` rows, about ``chunks`` chunk times per request."""
    rng = np.random.default_rng(seed)
    groups = len(ARMS) * STEPS
    group = np.sort(rng.integers(0, groups, records))
    arm_idx, step = group // STEPS, group % STEPS
    step_start = ((arm_idx * (STEPS + 1) + step) * STEP_S * 1e9).astype(np.int64) + 10**12
    send = step_start + (rng.random(records) * STEP_S * 1e9).astype(np.int64)
    ttft = (rng.gamma(2.0, 60e6, records) * (1 + arm_idx * 0.1)).astype(np.int64)
    n = np.clip(rng.poisson(chunks, records), 1, None).astype(np.int64)
    total = int(n.sum())
    offsets = np.zeros(records + 1, dtype=np.int64)
    np.cumsum(n, out=offsets[1:])
    gaps = rng.gamma(2.0, 10e6, total).astype(np.int64)
    gaps[offsets[:-1]] = send + ttft  # first chunk: absolute time of the first token
    values = np.cumsum(gaps)
    values -= np.repeat(np.concatenate([[0], values[offsets[1:-1] - 1]]), n)
    first_token = values[offsets[:-1]]
    parsed = first_token + rng.gamma(1.5, 0.3e6, records).astype(np.int64)  # the client's own delay, ~0.5 ms
    end = values[offsets[1:] - 1] + 1_000_000
    err = rng.random(records) < 0.01
    kinds = np.full(records, None, dtype=object)
    kinds[err] = ERROR_KINDS[rng.integers(0, len(ERROR_KINDS), int(err.sum()))]
    prompt = rng.integers(200, 8000, records)
    cached = (prompt * rng.choice([0.0, 0.5, 0.95], records)).astype(np.int64)
    hash_n = np.full(records, 4, dtype=np.int64)
    hash_offsets = np.concatenate([[0], np.cumsum(hash_n)]).astype(np.int32)
    labels = np.array([f"c{2 ** (s + 2)}" for s in range(STEPS)], dtype=object)
    columns: dict[str, pa.Array] = {
        "arm": pa.array(np.array(ARMS, dtype=object)[arm_idx], pa.string()),
        "step": pa.array(step, pa.int32()), "step_label": pa.array(labels[step], pa.string()),
        "concurrency": pa.array(2 ** (step + 2), pa.int32()),
        "user": pa.array(rng.integers(0, 64, records), pa.int32()),
        "request_id": pa.array(np.char.add("r", np.arange(records).astype(str)).astype(object), pa.string()),
        "request_class": pa.array(np.where(prompt > 4000, "long", "short").astype(object), pa.string()),
        "api": pa.array(np.full(records, "completions", dtype=object), pa.string()),
        "planned_send_ns": pa.array(send - rng.integers(0, 2_000_000, records), pa.int64()),
        "send_ns": pa.array(send, pa.int64()), "send_wall_ns": pa.array(send + 1_700_000_000 * 10**9, pa.int64()),
        "first_byte_ns": pa.array(first_token - 1000, pa.int64()),
        "first_token_ns": pa.array(first_token, pa.int64()), "end_ns": pa.array(end, pa.int64()),
        "chunk_ns": pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pa.array(values, pa.int64())),
        "prompt_tokens_target": pa.array(prompt, pa.int32()), "output_tokens_target": pa.array(n, pa.int32()),
        "prompt_tokens": pa.array(prompt, pa.int32()), "output_tokens": pa.array(n, pa.int32()),
        "cached_tokens": pa.array(cached, pa.int32()), "http_status": pa.array(np.where(err, 500, 200), pa.int32()),
        "error_kind": pa.array(kinds, pa.string()),
        "hash_ids": pa.ListArray.from_arrays(pa.array(hash_offsets), pa.array(rng.integers(0, 10**9, int(
            hash_n.sum())), pa.int64())),
        "hash_block_tokens": pa.array(np.full(records, 128), pa.int32()),
        "first_token_parsed_ns": pa.array(parsed, pa.int64()),
        "first_token_source": pa.array(np.full(records, "kernel", dtype=object), pa.string()),
    }
    arrays = [columns[f.name] if f.name in columns else pa.nulls(records, f.type) for f in SCHEMA]
    return pa.Table.from_arrays(arrays, schema=SCHEMA)


def run(records: int, chunks: int, *, in_memory: bool, seed: int) -> dict[str, float]:
    """Synthesise, then time load + derive + tables + windows; returns seconds per phase."""
    t0 = time.perf_counter()
    table = synth_table(records, chunks, seed)
    timings = {"synthesise_s": time.perf_counter() - t0}
    slo = SloSpec(ttft_p99_ms=500.0, itl_p99_ms=50.0, e2e_p99_ms=5000.0)
    with tempfile.TemporaryDirectory(prefix="harness-bench-") as tmp:
        cpu = time.process_time()
        if in_memory:
            start = time.perf_counter()
            df = table_to_frame(table)
        else:
            t = time.perf_counter()
            pq.write_table(table, RunDir(Path(tmp)).requests)
            timings["write_parquet_s"] = time.perf_counter() - t
            del table
            start = time.perf_counter()
            df = load_requests(Path(tmp))
        timings["load_s"] = time.perf_counter() - start
        t = time.perf_counter()
        df = derive_latencies(df)
        timings["derive_s"] = time.perf_counter() - t
        t = time.perf_counter()
        tables = analyze_arms(df, slo, 10.0)
        timings["tables_and_windows_s"] = time.perf_counter() - t
        timings["analysis_total_s"] = time.perf_counter() - start
        timings["analysis_cpu_s"] = time.process_time() - cpu
    timings["steps"] = float(sum(len(a.steps) for a in tables.values()))
    timings["windows"] = float(sum(len(a.windows) for a in tables.values()))
    return timings


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    parser = argparse.ArgumentParser(prog="python -m tools.bench.analysis", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="request records (default 1,000,000)")
    parser.add_argument("--chunks", type=int, default=64, help="mean chunks per request (default 64)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--in-memory", action="store_true", help="skip the parquet round trip")
    parser.add_argument("--json", action="store_true", help="print the timings as JSON")
    args = parser.parse_args(argv)
    if not 1 <= args.records <= 50_000_000 or not 1 <= args.chunks <= 10_000:
        parser.error("--records must be 1..50,000,000 and --chunks 1..10,000")
    timings = run(args.records, args.chunks, in_memory=args.in_memory, seed=args.seed)
    if args.json:
        print(json.dumps(timings))
    else:
        for key, value in timings.items():
            print(f"{key:>22}: {value:.2f}")
        verdict = "within" if timings["analysis_total_s"] < 30 else "OVER"
        print(f"analysed {args.records:,} records in {timings['analysis_total_s']:.2f} s wall, "
              f"{timings['analysis_cpu_s']:.2f} s CPU ({verdict} the 30 s goal)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
