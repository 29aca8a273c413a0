"""Render benchmark: ``python -m tools.bench.report [--runs N]`` times writing all reports for the sample summary.

The first render pays for importing matplotlib and loading fonts; it is reported apart from the steady state.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from harness.report.writers import render_run
from tests.support.sample import sample_summary, write_sample_run

MAX_RUNS = 1000


@dataclass(frozen=True)
class BenchResult:
    """Seconds per full render (summary.json, summary.md, junit.xml, report.html) and the report's size."""

    runs: int
    first_s: float
    median_s: float
    max_s: float
    report_bytes: int


def bench_render(n_runs: int = 5) -> BenchResult:
    """Render the sample run ``n_runs`` times (1..1000) into a temporary directory."""
    if not 1 <= n_runs <= MAX_RUNS:
        raise ValueError(f"n_runs must be between 1 and {MAX_RUNS}, got {n_runs}")
    times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="harness-bench-") as tmp:
        run_dir = write_sample_run(Path(tmp) / "run", sample_summary())
        for _ in range(n_runs):
            t0 = time.perf_counter()
            written = render_run(run_dir)
            times.append(time.perf_counter() - t0)
        size = written["html"].stat().st_size
    steady = times[1:] or times
    return BenchResult(runs=n_runs, first_s=times[0], median_s=statistics.median(steady), max_s=max(steady),
                       report_bytes=size)


def main(argv: list[str] | None = None) -> int:
    """Print the benchmark's figures."""
    parser = argparse.ArgumentParser(prog="python -m tools.bench.report", description=__doc__)
    parser.add_argument("--runs", type=int, default=5, help="renders to time (1..1000; default 5)")
    args = parser.parse_args(argv)
    try:
        result = bench_render(args.runs)
    except ValueError as exc:
        parser.error(str(exc))
    print(f"report render: runs={result.runs} first={result.first_s * 1000:.0f} ms "
          f"median={result.median_s * 1000:.0f} ms max={result.max_s * 1000:.0f} ms "
          f"report.html={result.report_bytes / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
