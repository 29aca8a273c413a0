"""Sections 1 and 2 of ``make perf``: client capacity against a peer, and the TTFT clock's fidelity.

Capacity: one fast simulator (:mod:`harness.perf.server`); per concurrency level, the harness's load path
and the peer each run the same workload ``repeats`` times, alternating; each tool keeps its most efficient
run (the host is shared with other work: the best run is the one least disturbed). The goal row compares
completed tokens per client CPU second, harness / best peer, and must be at least 1.

Fidelity: a paced simulator (the modelled H200 speed), 64 streams; per request |client first-token time -
simulator first-token send time|, both ``perf_counter_ns`` on CLOCK_MONOTONIC, joined on the response id.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from harness.perf.harness_client import run_harness, warm_runner
from harness.perf.model import ClientRun, Workload, percentile
from harness.perf.peer_vllm import TOOL as PEER_TOOL
from harness.perf.peer_vllm import PeerError, PeerSetup, run_peer
from harness.perf.procs import CpuPlan, pin_self
from harness.perf.profile import ProfileSummary, profile_run
from harness.perf.server import perf_sim
from harness.perf.table import Goal, Row

HARNESS_TOOL = "harness (gevent)"
RATIO_GOAL = Goal(">=", 1.0, "x")
TTFT_P99_GOAL = Goal("<", 5.0, "ms")
SECTION_CAP, SECTION_TTFT = "1 client capacity", "2 timing fidelity"


@dataclass(frozen=True)
class CapacityOptions:
    """What to run: levels, size of each run, repeats, the peer (None: no peer)."""

    levels: tuple[int, ...] = (64, 256)
    tokens_per_run: int = 400_000
    output_tokens: int = 256
    prompt_words: int = 128
    repeats: int = 2
    peer: PeerSetup | None = None
    peer_error: str | None = None  # why there is no peer
    fidelity_streams: int = 64
    fidelity_requests_per_stream: int = 6
    profile_path: Path | None = None  # py-spy stacks here when the harness misses the efficiency goal

    def workload(self, level: int) -> Workload:
        """The workload at ``level`` streams: whole requests per stream, about ``tokens_per_run`` tokens."""
        per_stream = max(2, math.ceil(self.tokens_per_run / self.output_tokens / level))
        return Workload(level, per_stream * level, self.prompt_words, self.output_tokens)


@dataclass
class CapacityResult:
    """Every run, by (tool, level), and the problems met."""

    runs: dict[tuple[str, int], list[ClientRun]] = field(default_factory=dict)
    errors: dict[tuple[str, int], str] = field(default_factory=dict)
    profile: ProfileSummary | str | None = None
    profile_level: int | None = None

    def best(self, tool: str, level: int) -> ClientRun | None:
        """The tool's most efficient run at ``level`` (most tokens per client CPU second)."""
        runs = [r for r in self.runs.get((tool, level), []) if r.tokens > 0 and r.cpu_s > 0]
        return max(runs, key=lambda r: r.tokens_per_cpu_s) if runs else None


def _attempt(result: CapacityResult, key: tuple[str, int], fn: Callable[[], ClientRun]) -> None:
    try:
        result.runs.setdefault(key, []).append(fn())
    except (PeerError, RuntimeError, OSError, ValueError) as exc:
        result.errors[key] = str(exc)[:400]


def measure_capacity(opts: CapacityOptions, cpus: CpuPlan, log: Callable[[str], None]) -> CapacityResult:
    """Run every (tool, level, repeat) against one fast simulator; profile the worst level if asked."""
    result = CapacityResult()
    with tempfile.TemporaryDirectory(prefix="harness-perf-cap-") as tmp:
        truth = Path(tmp) / "truth.jsonl"
        with perf_sim("fast", truth, cpus) as sim:
            pin_self(cpus.server)
            for level in opts.levels:
                workload = opts.workload(level)
                for rep in range(opts.repeats):
                    log(f"capacity: {HARNESS_TOOL}, {level} streams, run {rep + 1}/{opts.repeats} "
                        f"({workload.requests} requests x {workload.output_tokens} tokens)")
                    _attempt(result, (HARNESS_TOOL, level), partial(
                        run_harness, sim.base_url, truth, workload, cpus, label=HARNESS_TOOL))
                    if opts.peer is not None and (PEER_TOOL, level) not in result.errors:
                        log(f"capacity: {PEER_TOOL}, {level} streams, run {rep + 1}/{opts.repeats}")
                        _attempt(result, (PEER_TOOL, level), partial(
                            run_peer, opts.peer, sim.base_url, truth, workload, cpus,
                            Path(tmp) / f"peer-c{level}-{rep}"))
            worst = worst_level(result, opts.levels)
            if opts.profile_path is not None and worst is not None:
                log(f"capacity: the harness misses the efficiency goal at {worst} streams: profiling one more run")
                result.profile_level = worst
                result.profile = profile_run(warm_runner(cpus), partial(
                    run_harness, sim.base_url, truth, opts.workload(worst), cpus, label=HARNESS_TOOL),
                    opts.profile_path)
    return result


def worst_level(result: CapacityResult, levels: tuple[int, ...]) -> int | None:
    """The level where the harness's efficiency ratio to the peer is lowest and below 1, else None."""
    ratios = {}
    for level in levels:
        mine, peer = result.best(HARNESS_TOOL, level), result.best(PEER_TOOL, level)
        if mine is not None and peer is not None:
            ratios[level] = mine.tokens_per_cpu_s / peer.tokens_per_cpu_s
    below = {lvl: r for lvl, r in ratios.items() if r < RATIO_GOAL.limit}
    return min(below, key=lambda lvl: below[lvl]) if below else None


def measure_fidelity(opts: CapacityOptions, cpus: CpuPlan, log: Callable[[str], None]) -> ClientRun | str:
    """The harness at ``fidelity_streams`` against the paced simulator; the run, or why it failed."""
    streams = opts.fidelity_streams
    workload = Workload(streams, streams * opts.fidelity_requests_per_stream, opts.prompt_words,
                        opts.output_tokens)
    log(f"timing fidelity: {HARNESS_TOOL}, {streams} streams, paced simulator ({workload.requests} requests)")
    with tempfile.TemporaryDirectory(prefix="harness-perf-ttft-") as tmp:
        truth = Path(tmp) / "truth.jsonl"
        try:
            with perf_sim("paced", truth, cpus) as sim:
                pin_self(cpus.server)
                return run_harness(sim.base_url, truth, workload, cpus, label=HARNESS_TOOL)
        except (RuntimeError, OSError, ValueError) as exc:
            return str(exc)[:400]


def _run_note(run: ClientRun) -> str:
    note = (f"{run.completed} ok/{run.errors} err, {run.tokens:,} tok in {run.window_s:.1f} s, "
            f"{run.cpu_s:.1f} CPU-s ({100 * run.cpu_s / run.window_s:.0f}% of a core)")
    if run.server_tokens is not None and run.server_tokens != run.tokens:
        note += f"; server sent {run.server_tokens:,}"
    return note


def capacity_rows(result: CapacityResult, opts: CapacityOptions) -> list[Row]:
    """Per level: tokens/s and CPU s per 1k tokens for each tool, then the efficiency ratio with its goal."""
    rows: list[Row] = []
    tools = [HARNESS_TOOL] + ([PEER_TOOL] if opts.peer is not None or opts.peer_error else [])
    for level in opts.levels:
        for tool in tools:
            run = result.best(tool, level)
            why = result.errors.get((tool, level)) or (opts.peer_error if tool == PEER_TOOL else None)
            if run is None:
                why = why or "no successful run"
                rows += [Row(SECTION_CAP, f"{level} streams: completed tokens/s", tool, None, error=why),
                         Row(SECTION_CAP, f"{level} streams: client CPU s per 1k tokens", tool, None, error=why)]
                continue
            rows += [Row(SECTION_CAP, f"{level} streams: completed tokens/s", tool, run.tokens_per_s, "tok/s",
                         note=_run_note(run)),
                     Row(SECTION_CAP, f"{level} streams: client CPU s per 1k tokens", tool,
                         run.cpu_s_per_1k_tokens, "s", note=f"{run.tokens_per_cpu_s:,.0f} tokens per client CPU-s")]
        rows.append(ratio_row(level, result.best(HARNESS_TOOL, level), result.best(PEER_TOOL, level)))
    return rows


def ratio_row(level: int, mine: ClientRun | None, peer: ClientRun | None) -> Row:
    """Harness / best peer completed tokens per client CPU second (goal >= 1)."""
    figure = f"{level} streams: tokens per client CPU-s, harness / best peer"
    if mine is None or peer is None:
        return Row(SECTION_CAP, figure, "ratio", None, goal=RATIO_GOAL,
                   error="needs both the harness and a peer run")
    ratio = mine.tokens_per_cpu_s / peer.tokens_per_cpu_s
    return Row(SECTION_CAP, figure, "ratio", ratio, "x", RATIO_GOAL,
               note=f"{mine.tokens_per_cpu_s:,.0f} vs {peer.tokens_per_cpu_s:,.0f} ({peer.tool})")


def fidelity_rows(fidelity: ClientRun | str, capacity: CapacityResult, streams: int) -> list[Row]:
    """Median and p99 |TTFT error| at ``streams`` (paced server; goal on the p99), plus the saturated case."""
    median_fig, p99_fig = (f"{streams} streams: |TTFT error| median", f"{streams} streams: |TTFT error| p99")
    if isinstance(fidelity, str):
        return [Row(SECTION_TTFT, median_fig, HARNESS_TOOL, None, error=fidelity),
                Row(SECTION_TTFT, p99_fig, HARNESS_TOOL, None, goal=TTFT_P99_GOAL, error=fidelity)]
    errs = fidelity.ttft_errors_ms
    joined = f"{len(errs)} of {fidelity.completed} requests joined to the simulator's first_token_sent_ns"
    rows = [Row(SECTION_TTFT, median_fig, HARNESS_TOOL, percentile(errs, 50), "ms",
                note=f"paced simulator (modelled H200, {fidelity.tokens_per_s:,.0f} tok/s); {joined}"),
            Row(SECTION_TTFT, p99_fig, HARNESS_TOOL, percentile(errs, 99), "ms", TTFT_P99_GOAL,
                note=f"max {max(errs):.2f} ms" if errs else "",
                error=None if errs else "no request could be joined to the ground truth")]
    saturated = capacity.best(HARNESS_TOOL, streams)
    if saturated is not None and saturated.ttft_errors_ms:
        rows.append(Row(SECTION_TTFT, f"{streams} streams: |TTFT error| p99, server at full speed", HARNESS_TOOL,
                        percentile(saturated.ttft_errors_ms, 99), "ms",
                        note=f"median {percentile(saturated.ttft_errors_ms, 50):.1f} ms; the client core is "
                             "saturated here, so tokens wait in socket buffers (informative, no goal)"))
    return rows
