"""Stress: repeat a short two-process step many times; each must end within its deadline with every record counted.

``python tests/integration/distributed/stress_two_processes.py --repeats 50`` (the slow-marked test
``test_two_process_steps_never_stall`` runs a few). Each repetition runs one request-bounded closed-loop step
(``--concurrency`` users, ``--requests`` requests, also bounded by ``--duration`` seconds) with
``processes: 2`` against a simulator, and checks: no error, the step's wall time under ``--deadline`` seconds,
``requests`` rows in the step's record parts, every row's ``send_ns`` inside the step's span (the counted-rows
mask), and both ranks reporting. Prints one line per repetition and a summary; exit 1 if any repetition failed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "load"))
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # run as a script: tests.support from the repo root
from load_it_helpers import step_run

from harness.config.steps import StepLevel
from harness.load import prewarm_runner, run_step, shutdown_runners
from tests.support.sim import running_sim


def one_step(base_url: str, records: Path, index: int, args: argparse.Namespace) -> str | None:
    """Run one two-process step; None when it passed, else what went wrong."""
    level = StepLevel(concurrency=args.concurrency, requests=args.requests, duration_s=args.duration)
    started = time.monotonic()
    out = run_step(step_run(base_url, records, level, index, processes=2, drain_timeout_s=5.0))
    took = time.monotonic() - started
    problems = []
    if out.error:
        problems.append(f"error: {out.error}")
    if took > args.deadline:
        problems.append(f"took {took:.1f} s (deadline {args.deadline:g} s)")
    rows = [r for part in out.parts for r in pq.read_table(part, columns=["send_ns"]).to_pylist()]
    counted = sum(1 for r in rows if out.start_ns <= r["send_ns"] <= out.end_ns)
    if len(rows) != args.requests or counted != len(rows):
        problems.append(f"{len(rows)} rows, {counted} inside the span, {args.requests} planned")
    ranks = sorted(p.rank for p in out.client.per_process)
    if ranks != [0, 1]:
        problems.append(f"ranks reporting: {ranks}")
    print(f"step {index}: {took:.1f} s, {len(rows)} rows" + (f" -- {'; '.join(problems)}" if problems else ""),
          flush=True)
    return "; ".join(problems) or None


def main(argv: list[str] | None = None) -> int:
    """Run the repetitions; exit 0 when all passed."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--deadline", type=float, default=40.0)
    parser.add_argument("--time-scale", type=float, default=0.05)
    parser.add_argument("--max-minutes", type=float, default=60.0, help="stop starting repetitions after this")
    args = parser.parse_args(argv)
    failures: list[str] = []
    done = 0
    limit = time.monotonic() + 60 * args.max_minutes
    prewarm_runner()
    try:
        with running_sim(profile="demo", time_scale=args.time_scale) as sim, \
                tempfile.TemporaryDirectory(prefix="stress-") as tmp:
            for index in range(args.repeats):
                if time.monotonic() > limit:
                    break
                problem = one_step(sim.base_url, Path(tmp) / "records", index, args)
                done += 1
                if problem:
                    failures.append(f"step {index}: {problem}")
    finally:
        shutdown_runners()
    print(f"{done} repetition(s), {len(failures)} failed" + "".join(f"\n  {f}" for f in failures))
    return 1 if failures or done == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
