"""Run an arm's capacity search (``steps.search``) on its own server, after its fixed steps and before its drills.

Each probe is a journaled step (index :func:`harness.decision.capacity.probe_index`, label ``search-c48``) whose
entry carries ``search: {session, probe, load, extended}``; it is judged from its own records with the same code
``harness report`` uses (:mod:`harness.decision.capacity_summary`), and the next load follows from the outcomes
(:func:`harness.decision.capacity.next_probe`). At most ``max_probes`` probes run, and none starts after
``max_search_s`` seconds of the search, read from the clock the arm's steps run on (``runner.backend.clock``): real
seconds on the real clock, modelled seconds on the virtual clock, so a virtual search probes the same loads on any
host. A resumed run searches again on its fresh server as a new session (the latest one counts).
"""

from __future__ import annotations

from typing import Any

from harness.config.search import SearchSpec, fmt_load, slo_text
from harness.config.steps import StepLevel
from harness.decision.capacity import PROBE_BASE, Probe, is_probe_index, next_probe, probe_index, probe_label
from harness.decision.capacity_summary import (
    arm_capacity,
    interval_text,
    probe_result,
    probe_step_summaries,
    session,
)
from harness.launch.base import RunningServer
from harness.run.arm_errors import StepProblem
from harness.run.arm_handle import ArmHandle
from harness.rundir import journal
from harness.rundir.entries import ProbeSearch, StepEntry
from harness.schema.capacity import CapacityProbe


def _level(spec: SearchSpec, kind: str, probe: Probe) -> StepLevel:
    factor = spec.extend_factor if probe.extended else 1.0
    requests = int(spec.probe_requests * factor) if spec.probe_requests is not None else None
    return StepLevel(concurrency=int(probe.load) if kind == "concurrency" else None,
                     rate_rps=probe.load if kind == "rate" else None, duration_s=spec.probe_duration_s * factor,
                     requests=requests, think_time_s=spec.think_time_s)


def _earlier(runner: ArmHandle) -> list[StepEntry]:
    return [e for e in journal.read_step_entries(runner.ctx.run, strict=False)
            if e.arm == runner.arm.name and is_probe_index(e.step)]


def _judge(runner: ArmHandle, spec: SearchSpec, index: int, label: str) -> CapacityProbe:
    """The probe just run, judged from its records and journal entry."""
    from harness.analysis.latency import derive_latencies
    from harness.analysis.load import table_to_frame
    from harness.rundir.parts import find_parts, part_prefix, read_parts

    entry = [e for e in _earlier(runner) if e.step == index][-1]
    table, _ = read_parts(find_parts(runner.ctx.run.records_dir(runner.arm.name), part_prefix(index, label)))
    df = derive_latencies(table_to_frame(table))
    steps = probe_step_summaries(runner.ctx.scenario, df, [entry])
    return probe_result(spec, entry, steps[0] if steps else None)


def run_search(runner: ArmHandle, server: RunningServer, scraper: Any, tokenizer: Any) -> StepProblem | None:
    """The arm's capacity search; returns why it could not go on (the server died), or None. Only the scenario's
    arms search (not the baseline's A/A re-run)."""
    scenario = runner.ctx.scenario
    spec = scenario.steps.search
    arm = runner.arm.name
    if spec is None or arm not in {a.name for a in scenario.arms}:
        return None
    kind = scenario.steps.search_kind
    earlier = _earlier(runner)
    this_session = max((session(e) for e in earlier), default=0) + 1
    k = max((PROBE_BASE - e.step + 1 for e in earlier), default=0)
    runner.ctx.say(f"[{arm}] capacity search: the highest load with {slo_text(spec)}, "
                   f"{fmt_load(kind, spec.low)} to {fmt_load(kind, spec.high)}, at most {spec.max_probes} probes")
    probes: list[Probe] = []
    results: list[CapacityProbe] = []
    clock = runner.backend.clock  # the arm's own clock: modelled time on the virtual clock, never the host's
    started = clock.mono_ns()
    while (nxt := next_probe(spec, kind, probes)) is not None:
        if spec.max_search_s is not None and (clock.mono_ns() - started) / 1e9 >= spec.max_search_s:
            runner.ctx.say(f"[{arm}] capacity search: max_search_s ({spec.max_search_s:g} s) reached")
            break
        index, label = probe_index(k), probe_label(kind, nxt.load)
        k += 1
        info = ProbeSearch(session=this_session, probe=len(probes) + 1, load=nxt.load, extended=nxt.extended)
        problem = runner.run_journaled_step(server, scraper, tokenizer, index, label, _level(spec, kind, nxt),
                                           journal_extra={"search": info})
        if problem is not None:
            return problem
        result = _judge(runner, spec, index, label)
        results.append(result)
        probes.append(Probe(nxt.load, result.outcome, nxt.extended))
        runner.ctx.say(f"[{arm}] probe {len(probes)}: {fmt_load(kind, nxt.load)}"
                       f"{' (re-run, longer)' if nxt.extended else ''}: p{spec.percentile} {interval_text(result)} "
                       f"from {result.n} samples — {result.outcome}")
    cap = arm_capacity(spec, kind, arm, results)
    runner.ctx.say(f"[{arm}] capacity: {cap.message}")
    runner.ctx.record_arm(arm, "capacity", status=cap.status, capacity=cap.capacity, not_met=cap.not_met,
                          probes=len(results), session=this_session)
    return None
