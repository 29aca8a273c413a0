"""Sections 1 and 2 of ``make perf``: client capacity against a peer, and the TTFT clock's fidelity.

Capacity: one fast simulator (:mod:`tools.perf.server`); per concurrency level, the harness's load path
and the peer each run the same workload ``repeats`` times, alternating; each tool keeps its most efficient
run (the host is shared with other work: the best run is the one least disturbed). The goal row compares
completed tokens per client CPU second, harness / best peer, and must be at least 1.

Fidelity: a paced simulator (the modelled H200 speed), 64 streams; per request |client first-token time -
simulator first-token send time|, both ``perf_counter_ns`` on CLOCK_MONOTONIC, joined on the response id.
The peer runs against the paced simulator too: an efficiency comparison at a realistic token rate, where
each read brings one event rather than many (informative; the goal is on the fast server, as the issue asks).
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from tools.perf.harness_client import run_harness, warm_runner
from tools.perf.model import ClientRun, Workload
from tools.perf.peer_vllm import TOOL as PEER_TOOL
from tools.perf.peer_vllm import PeerError, PeerSetup, run_peer
from tools.perf.procs import CpuPlan, pin_self
from tools.perf.profile import ProfileSummary, profile_run
from tools.perf.server import Pace, perf_sim
from tools.perf.table import Goal

HARNESS_TOOL = "harness (gevent)"
RATIO_GOAL = Goal(">=", 1.0, "x")


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


def _run_tools(result: CapacityResult, opts: CapacityOptions, cpus: CpuPlan, log: Callable[[str], None],
               pace: Pace, workloads: list[Workload]) -> None:
    """Every (tool, workload, repeat) against one simulator of ``pace``, alternating the tools."""
    with tempfile.TemporaryDirectory(prefix=f"harness-perf-{pace}-") as tmp:
        truth = Path(tmp) / "truth.jsonl"
        with perf_sim(pace, truth, cpus) as sim:
            pin_self(cpus.server)
            for workload in workloads:
                level = workload.concurrency
                for rep in range(opts.repeats):
                    log(f"{pace} server: {HARNESS_TOOL}, {level} streams, run {rep + 1}/{opts.repeats} "
                        f"({workload.requests} requests x {workload.output_tokens} tokens)")
                    _attempt(result, (HARNESS_TOOL, level), partial(
                        run_harness, sim.base_url, truth, workload, cpus, label=HARNESS_TOOL))
                    if opts.peer is not None and (PEER_TOOL, level) not in result.errors:
                        log(f"{pace} server: {PEER_TOOL}, {level} streams, run {rep + 1}/{opts.repeats}")
                        _attempt(result, (PEER_TOOL, level), partial(
                            run_peer, opts.peer, sim.base_url, truth, workload, cpus,
                            Path(tmp) / f"peer-c{level}-{rep}"))
            worst = worst_level(result, tuple(w.concurrency for w in workloads))
            if pace == "fast" and opts.profile_path is not None and worst is not None:
                log(f"fast server: the harness misses the efficiency goal at {worst} streams: profiling one more run")
                result.profile_level = worst
                try:
                    result.profile = profile_run(warm_runner(cpus), partial(
                        run_harness, sim.base_url, truth, opts.workload(worst), cpus, label=HARNESS_TOOL),
                        opts.profile_path)
                except (RuntimeError, OSError, ValueError) as exc:
                    result.profile = f"no profile: {str(exc)[:400]}"


def measure_capacity(opts: CapacityOptions, cpus: CpuPlan, log: Callable[[str], None]) -> CapacityResult:
    """Section 1: the fast simulator at every level; profile the worst level if the harness misses the goal."""
    result = CapacityResult()
    _run_tools(result, opts, cpus, log, "fast", [opts.workload(level) for level in opts.levels])
    return result


def measure_paced(opts: CapacityOptions, cpus: CpuPlan, log: Callable[[str], None]) -> CapacityResult:
    """Section 2 (and a realistic efficiency comparison): the paced simulator at ``fidelity_streams``."""
    streams = opts.fidelity_streams
    workload = Workload(streams, streams * opts.fidelity_requests_per_stream, opts.prompt_words,
                        opts.output_tokens)
    result = CapacityResult()
    try:
        _run_tools(result, opts, cpus, log, "paced", [workload])
    except (RuntimeError, OSError, ValueError) as exc:  # the simulator did not start
        result.errors[(HARNESS_TOOL, streams)] = str(exc)[:400]
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
