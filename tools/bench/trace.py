"""Benchmark of trace analysis (``make perf``): ``python -m tools.bench.trace --requests 1000000``.

Synthesises a Mooncake-like trace (about 30 blocks per request, see
:func:`harness.trace.mooncake.synthesize_mooncake`), then times

1. the analysis alone (stack distances, curve, reuse statistics, JSON document) on the in-memory trace, and
2. unless ``--no-file``: the end-to-end path of ``harness analyze-trace``: write the JSONL, read it back, analyse.

Prints wall and CPU seconds for each (the host may be shared) and whether the analysis met the goal.
Not a pytest test.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from harness.trace.analysis import AnalysisOptions, TraceAnalysis, analyze
from harness.trace.blocks import BlockTrace, from_requests
from harness.trace.mooncake import MOONCAKE_BLOCK_TOKENS, synthesize_mooncake, write_mooncake
from harness.trace.readers import load_trace
from harness.trace.units import MODEL_PROFILES, parse_capacities


class _Timer:
    """Wall (perf_counter) and CPU (process_time) seconds of a block."""

    def __enter__(self) -> _Timer:
        self.wall0, self.cpu0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = time.process_time() - self.cpu0

    def __str__(self) -> str:
        return f"{self.wall:.1f} s wall ({self.cpu:.1f} s CPU)"


def _options() -> AnalysisOptions:
    return AnalysisOptions(
        kv_bytes_per_token=MODEL_PROFILES["llama-3.1-8b"],
        capacities=tuple(parse_capacities("1000,10000,50000")),
    )


def _report(label: str, trace: BlockTrace, result: TraceAnalysis, timer: _Timer) -> None:
    doc = result.document
    ratios = ", ".join(f"{r['given']}: {r['hit_ratio']:.4f}" for r in doc["capacities"])
    print(
        f"{label}: {trace.n_requests:,} requests, {trace.n_blocks:,} blocks "
        f"({trace.n_blocks / max(1, trace.n_requests):.1f} per request), "
        f"{doc['unique_blocks']:,} unique: {timer}"
    )
    print(f"  hit ratio at {ratios}; infinite cache {doc['infinite_cache_hit_ratio']:.4f}")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 0 (the goal is reported, not enforced, unless ``--enforce``)."""
    parser = argparse.ArgumentParser(prog="python -m tools.bench.trace", description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1_000_000, help="requests to synthesise (default 1000000)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--goal-s", type=float, default=60.0, help="goal for the analysis wall time")
    parser.add_argument("--no-file", action="store_true", help="skip the JSONL write/read round")
    parser.add_argument("--enforce", action="store_true", help="exit 1 when the analysis misses the goal")
    args = parser.parse_args(argv)

    with _Timer() as t_synth:
        requests = synthesize_mooncake(args.requests, args.seed)
        trace = from_requests(requests, MOONCAKE_BLOCK_TOKENS, source="synthetic")
    print(f"synthesised {len(requests):,} requests: {t_synth}")

    with _Timer() as t_analysis:
        result = analyze(trace, _options())
    _report("analysis (in memory)", trace, result, t_analysis)
    met = t_analysis.wall < args.goal_s
    print(f"  goal < {args.goal_s:.0f} s: {'met' if met else 'MISSED'}")

    if not args.no_file:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "trace.jsonl"
            with _Timer() as t_write:
                write_mooncake(path, requests)
            print(f"wrote {path.stat().st_size / 2**20:,.0f} MiB of JSONL: {t_write}")
            del requests
            with _Timer() as t_read:
                loaded = load_trace(path, "mooncake")
            with _Timer() as t_file:
                file_result = analyze(loaded.trace, _options(), fmt=loaded.format)
            print(f"read JSONL: {t_read}")
            _report("analysis (from file)", loaded.trace, file_result, t_file)
            print(f"  end to end (read + analyse): {t_read.wall + t_file.wall:.1f} s wall")
    return 1 if args.enforce and not met else 0


if __name__ == "__main__":
    raise SystemExit(main())
