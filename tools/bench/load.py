"""``python -m tools.bench.load``: how fast and how accurate is the load generator? (for ``make perf``)

Against a local simulator it runs one closed-loop step per (client, concurrency) pair and prints, per pair,
the client's token throughput, its CPU seconds per 1000 streamed tokens, its send lag, and the median
|client TTFT - simulator first-token send time|. Long outputs and short prompts make it a streaming test;
the simulator runs on the same host, so on a small machine both compete for the cores (the CPU per 1000
tokens is the figure that travels).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.config.steps import StepLevel
from harness.config.workload import WorkloadSpec
from harness.load.runners import prewarm_runner, shutdown_runners
from harness.load.step import StepRun, run_step
from harness.rundir.parts import PART_GLOB, read_parts
from harness.sim.groundtruth import read_ground_truth
from harness.workload.tokens import calibrate_tokenizer
from tests.support.sim import running_sim


@dataclass
class BenchRow:
    """One (client, concurrency) measurement."""

    client: str
    concurrency: int
    requests: int
    errors: int
    output_tokens: int
    wall_s: float
    tokens_per_s: float
    cpu_s: float
    cpu_s_per_1000_tokens: float | None
    send_lag_ms_p99: float | None
    ttft_error_ms_median: float | None


def _workload(output: int) -> WorkloadSpec:
    return WorkloadSpec.model_validate({"seed": 1, "classes": [{
        "name": "stream", "weight": 1, "prompt_tokens": {"min": 64, "max": 128},
        "output_tokens": {"min": output, "max": output}}], "reuse": {"system_prompts": None}})


def _ttft_error(rows: list[dict[str, Any]], truth_path: Path) -> float | None:
    truth = {t["request_id"]: t for t in read_ground_truth(truth_path)}
    errors = []
    for r in rows:
        sent = truth.get(r["response_id"], {}).get("first_token_sent_ns")
        if sent and r["first_token_ns"]:
            errors.append(abs(r["first_token_ns"] - sent) / 1e6)
    return round(statistics.median(errors), 3) if errors else None


def run(clients: list[str], levels: list[int], duration_s: float, output: int, time_scale: float) -> list[BenchRow]:
    """Run every (client, concurrency) pair against one simulator."""
    rows: list[BenchRow] = []
    prewarm_runner()
    with tempfile.TemporaryDirectory(prefix="harness-load-bench-") as tmp, \
            running_sim(profile="demo", time_scale=time_scale, ground_truth=Path(tmp) / "truth.jsonl",
                        max_num_seqs=1024) as sim:
        calib = calibrate_tokenizer(sim.base_url, "sim-model", 10.0)
        index = 0
        for client in clients:
            for level in levels:
                records = Path(tmp) / f"records-{index}"
                out = run_step(StepRun(
                    base_url=sim.base_url, served_model="sim-model", workload=_workload(output),
                    level=StepLevel(concurrency=level, duration_s=duration_s), step_index=index,
                    step_label=f"{client}-c{level}", arm="bench", records_dir=records, request_timeout_s=120.0,
                    stream_idle_timeout_s=30.0, drain_timeout_s=30.0, max_model_len=calib.max_model_len,
                    tokenizer=calib, client=client))  # type: ignore[arg-type]
                table, _ = read_parts(sorted(records.glob(PART_GLOB)))
                data = table.to_pylist()
                tokens = sum(r["output_tokens"] or 0 for r in data)
                wall = (out.end_ns - out.start_ns) / 1e9
                rows.append(BenchRow(
                    client=client, concurrency=level, requests=out.requests, errors=out.errors,
                    output_tokens=tokens, wall_s=round(wall, 2), tokens_per_s=round(tokens / wall, 1) if wall else 0,
                    cpu_s=round(out.cpu_s, 3),
                    cpu_s_per_1000_tokens=round(1000 * out.cpu_s / tokens, 4) if tokens else None,
                    send_lag_ms_p99=out.client.send_lag_ms_p99,
                    ttft_error_ms_median=_ttft_error(data, Path(tmp) / "truth.jsonl")))
                index += 1
    shutdown_runners()
    return rows


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run, print a table (or JSON)."""
    parser = argparse.ArgumentParser(prog="python -m tools.bench.load", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", nargs="+", default=["gevent", "httpx"], choices=["gevent", "httpx"])
    parser.add_argument("--concurrency", nargs="+", type=int, default=[64, 256])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per step (default 10)")
    parser.add_argument("--output-tokens", type=int, default=256, help="tokens streamed per request")
    parser.add_argument("--time-scale", type=float, default=0.1, help="simulator time scale (smaller: faster)")
    parser.add_argument("--json", action="store_true", help="print JSON rows")
    args = parser.parse_args(argv)
    if any(c < 1 for c in args.concurrency) or args.duration <= 0:
        parser.error("concurrency and duration must be positive")
    rows = run(args.clients, args.concurrency, args.duration, args.output_tokens, args.time_scale)
    if args.json:
        print(json.dumps([asdict(r) for r in rows], indent=2))
        return 0
    print(f"{'client':8} {'streams':>7} {'requests':>8} {'errors':>6} {'tokens/s':>9} {'cpu s/1k tok':>12} "
          f"{'lag p99 ms':>10} {'ttft err ms':>11}")
    for r in rows:
        print(f"{r.client:8} {r.concurrency:>7} {r.requests:>8} {r.errors:>6} {r.tokens_per_s:>9.0f} "
              f"{r.cpu_s_per_1000_tokens if r.cpu_s_per_1000_tokens is not None else float('nan'):>12.4f} "
              f"{r.send_lag_ms_p99 if r.send_lag_ms_p99 is not None else float('nan'):>10.2f} "
              f"{r.ttft_error_ms_median if r.ttft_error_ms_median is not None else float('nan'):>11.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
