"""Table rows for sections 1 and 2: client capacity (fast and paced server) and TTFT fidelity.

Capacity rows give, per level and tool, completed tokens/s and client CPU seconds per 1000 tokens (the most
efficient run of each tool), then the ratio of tokens per client CPU second, harness / peer, which carries
the goal (>= 1) for the fast server. Fidelity rows pool the TTFT errors of every harness run against the
paced server (more samples, a steadier p99) and explain the tail: first tokens sent in bursts versus alone,
and how long the client waited for its core (other work on the host). The harness times a first token at its
arrival (the kernel's receive time on Linux), so its error no longer includes the client's own delay; two
informative rows show that delay (arrival to parse) and the error of the parse time (the TTFT before arrival times).
"""

from __future__ import annotations

from tools.perf.capacity import HARNESS_TOOL, RATIO_GOAL, CapacityOptions, CapacityResult
from tools.perf.harness_client import HarnessRun
from tools.perf.model import ClientRun, burst_split, percentile
from tools.perf.peer_vllm import TOOL as PEER_TOOL
from tools.perf.table import Goal, Row

SECTION_CAP, SECTION_TTFT = "1 client capacity", "2 timing fidelity"
TTFT_P99_GOAL = Goal("<", 1.0, "ms")  # |client first-token time - server send time| p99 at the paced server


def run_note(run: ClientRun) -> str:
    """What a run did: requests, tokens, window, CPU, and the client's wait for its core."""
    note = (f"{run.completed} ok/{run.errors} err, {run.tokens:,} tok in {run.window_s:.1f} s, "
            f"{run.cpu_s:.1f} CPU-s ({100 * run.cpu_s / run.window_s:.0f}% of a core)")
    if run.server_tokens is not None and run.server_tokens != run.tokens:
        note += f"; server sent {run.server_tokens:,}"
    if run.run_queue_wait_s is not None:
        note += f"; waited {run.run_queue_wait_s:.1f} s for its core"
    return note


def capacity_rows(result: CapacityResult, opts: CapacityOptions, levels: tuple[int, ...], server: str,
                  goal: Goal | None = RATIO_GOAL) -> list[Row]:
    """Per level: tokens/s and CPU s per 1k tokens for each tool, then the efficiency ratio."""
    rows: list[Row] = []
    tools = [HARNESS_TOOL] + ([PEER_TOOL] if opts.peer is not None or opts.peer_error else [])
    for level in levels:
        prefix = f"{level} streams, {server}"
        for tool in tools:
            run = result.best(tool, level)
            if run is None:
                why = _why_missing(result, opts, tool, level)
                rows += [Row(SECTION_CAP, f"{prefix}: completed tokens/s", tool, None, error=why),
                         Row(SECTION_CAP, f"{prefix}: client CPU s per 1k tokens", tool, None, error=why)]
                continue
            rows += [Row(SECTION_CAP, f"{prefix}: completed tokens/s", tool, run.tokens_per_s, "tok/s",
                         note=run_note(run)),
                     Row(SECTION_CAP, f"{prefix}: client CPU s per 1k tokens", tool, run.cpu_s_per_1k_tokens, "s",
                         note=f"{run.tokens_per_cpu_s:,.0f} tokens per client CPU-s")]
        rows.append(ratio_row(prefix, result.best(HARNESS_TOOL, level), result.best(PEER_TOOL, level), goal,
                              why=(_why_missing(result, opts, HARNESS_TOOL, level),
                                   _why_missing(result, opts, PEER_TOOL, level))))
    return rows


def _why_missing(result: CapacityResult, opts: CapacityOptions, tool: str, level: int) -> str:
    return (result.errors.get((tool, level)) or (opts.peer_error if tool == PEER_TOOL else None)
            or "no successful run")


def ratio_row(prefix: str, mine: ClientRun | None, peer: ClientRun | None, goal: Goal | None = RATIO_GOAL,
              why: tuple[str, str] = ("no successful run", "no successful run")) -> Row:
    """Harness / peer completed tokens per client CPU second (``why``: why each side has no run, if it has none)."""
    figure = f"{prefix}: tokens per client CPU-s, harness / peer"
    if mine is None or peer is None:
        missing = ([f"no harness run ({why[0]})"] if mine is None else []) + \
                  ([f"no peer run ({why[1]})"] if peer is None else [])
        return Row(SECTION_CAP, figure, "ratio", None, goal=goal,
                   error="needs both the harness and a peer run: " + "; ".join(missing))
    ratio = mine.tokens_per_cpu_s / peer.tokens_per_cpu_s
    return Row(SECTION_CAP, figure, "ratio", ratio, "x", goal,
               note=f"{mine.tokens_per_cpu_s:,.0f} vs {peer.tokens_per_cpu_s:,.0f} ({peer.tool})"
                    + ("" if goal else "; informative"))


def fidelity_rows(paced: CapacityResult, fast: CapacityResult, streams: int) -> list[Row]:
    """Median and p99 |TTFT error| at ``streams`` against the paced server (goal on the p99), plus the
    same at full server speed, where the client is saturated (informative)."""
    median_fig, p99_fig = (f"{streams} streams: |TTFT error| median", f"{streams} streams: |TTFT error| p99")
    runs = paced.runs.get((HARNESS_TOOL, streams), [])
    errs = [e for r in runs for e in r.ttft_errors_ms]
    if not errs:
        why = paced.errors.get((HARNESS_TOOL, streams)) or "no request could be joined to the ground truth"
        return [Row(SECTION_TTFT, median_fig, HARNESS_TOOL, None, error=why),
                Row(SECTION_TTFT, p99_fig, HARNESS_TOOL, None, goal=TTFT_P99_GOAL, error=why)]
    split = burst_split(errs, [s for r in runs for s in r.ttft_sent_ns])
    completed = sum(r.completed for r in runs)
    window = sum(r.window_s for r in runs)
    cpu = sum(r.cpu_s for r in runs)
    detail = (f"max {max(errs):.1f} ms; first tokens the server sent in bursts (>= {split.burst_size} within "
              f"2 ms): {len(split.in_bursts)}, p99 {percentile(split.in_bursts, 99):.1f} ms; others "
              f"{len(split.others)}, p99 {percentile(split.others, 99):.1f} ms")
    waits = [r.run_queue_wait_s for r in runs if r.run_queue_wait_s is not None]
    if waits:
        detail += f"; the client waited {sum(waits):.1f} s for its core in {window:.1f} s"
    rows = [Row(SECTION_TTFT, median_fig, HARNESS_TOOL, percentile(errs, 50), "ms",
                note=f"paced server (modelled H200), {len(runs)} run(s), {len(errs)} of {completed} requests "
                     f"joined on the response id; client {100 * cpu / window:.0f}% of a core"
                     + _sources_note(runs)),
            Row(SECTION_TTFT, p99_fig, HARNESS_TOOL, percentile(errs, 99), "ms", TTFT_P99_GOAL, note=detail)]
    rows += _arrival_rows(runs, streams)
    saturated = fast.best(HARNESS_TOOL, streams)
    if saturated is not None and saturated.ttft_errors_ms:
        rows.append(Row(SECTION_TTFT, f"{streams} streams: |TTFT error| p99, fast server", HARNESS_TOOL,
                        percentile(saturated.ttft_errors_ms, 99), "ms",
                        note=f"median {percentile(saturated.ttft_errors_ms, 50):.1f} ms; the client core is "
                             "saturated, so tokens wait in socket buffers (informative)"))
    return rows


def _sources_note(runs: list[ClientRun]) -> str:
    """How the first tokens' arrivals were timed (harness runs only)."""
    counts: dict[str, int] = {}
    for run in runs:
        if isinstance(run, HarnessRun):
            for source, n in run.first_token_sources.items():
                counts[source] = counts.get(source, 0) + n
    if not counts:
        return ""
    return "; first tokens timed at arrival: " + ", ".join(f"{n} {source}" for source, n in sorted(counts.items()))


def _arrival_rows(runs: list[ClientRun], streams: int) -> list[Row]:
    """Informative: the client's own delay (first token's arrival to its parse) and the parse time's error."""
    mine = [r for r in runs if isinstance(r, HarnessRun)]
    delays = [d for r in mine for d in r.first_token_delays_ms]
    parsed = [e for r in mine for e in r.ttft_parsed_errors_ms]
    if not delays or not parsed:
        return []
    return [Row(SECTION_TTFT, f"{streams} streams: first-token client delay p99", HARNESS_TOOL,
                percentile(delays, 99), "ms",
                note=f"arrival to parse in the client (the step's client-health figure); median "
                     f"{percentile(delays, 50):.2f} ms, max {max(delays):.1f} ms (informative)"),
            Row(SECTION_TTFT, f"{streams} streams: |TTFT error| p99, parse time", HARNESS_TOOL,
                percentile(parsed, 99), "ms",
                note=f"the first token timed when the parser got to it, as before arrival times; median "
                     f"{percentile(parsed, 50):.2f} ms (informative)")]


def fidelity_notes(paced: CapacityResult, streams: int) -> list[str]:
    """When the TTFT p99 goal is missed: how much of the window the client spent waiting for its core."""
    runs = paced.runs.get((HARNESS_TOOL, streams), [])
    errs = [e for r in runs for e in r.ttft_errors_ms]
    if not errs or TTFT_P99_GOAL.met(percentile(errs, 99)):
        return []
    over = sum(1 for e in errs if not TTFT_P99_GOAL.met(e))
    note = (f"TTFT p99 missed: {over} of {len(errs)} first tokens were timed {TTFT_P99_GOAL.limit:g} ms or more "
            f"after the simulator sent them.")
    waits = [r.run_queue_wait_s for r in runs if r.run_queue_wait_s is not None]
    window = sum(r.window_s for r in runs)
    if waits and window > 0:
        note += (f" The client's threads were runnable but waiting for their core {sum(waits):.1f} s of "
                 f"{window:.1f} s ({100 * sum(waits) / window:.0f}%): other processes on this host delay it; "
                 "a dedicated load-generator core or machine removes that part.")
    note += (" A first token is timed at its arrival (the kernel's receive time), so the client's own delay counts "
             "only where it outlasted the next token's arrival: Linux merges unread TCP segments and keeps the newest "
             "receive time (see docs/perf.md).")
    return [note]
