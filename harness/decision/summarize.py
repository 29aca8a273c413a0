"""Build ``summary.json`` from a run directory alone (what ``harness report RUN_DIR`` re-runs).

Reads: scenario.yaml, manifest.json, checks.json, arms.jsonl, steps.jsonl, request records, raw scrapes. Only
requests of a step's counted attempt inside its journaled time span count (so an interrupted, resumed step is not
counted twice; :func:`harness.rundir.attempts.counted_rows`, the selection the sequential looks and ``harness
compare`` make too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from harness.config import load_scenario
from harness.config.arms import Arm
from harness.config.scenario import Scenario
from harness.decision.break_even import break_even
from harness.decision.capacity_summary import capacity_section
from harness.decision.cold_start import cold_start_of, cold_start_rule
from harness.decision.decide import decide_arm, mark_shared, verdict
from harness.decision.drills import drill_results
from harness.decision.effects import budget_hints, effect_rows, mark_deciding, settle_hints
from harness.decision.evaluate import ArmData, ArmEvaluation, evaluate_arm, planned_steps
from harness.decision.hit_prediction import with_proofs
from harness.decision.live_config import live_config_checks
from harness.decision.noise_floor import aa_name, noise_floor, statistics_note
from harness.decision.records_check import missing_records, records_verdict
from harness.decision.rules.causal import fit_rule
from harness.decision.rules.fit import fit_screen, reuse_share
from harness.decision.rules.load_host import judged_steps
from harness.decision.value import value_section
from harness.decision.value_marginal import with_value_findings
from harness.rundir.attempts import counted_entries, counted_rows
from harness.rundir.entries import ArmEvent, StepEntry
from harness.rundir.journal import read_arm_events, read_step_entries
from harness.rundir.layout import (
    ARMS,
    CHECKS,
    COMPOSE_DIR,
    LOGS_DIR,
    MANIFEST,
    METRICS_DIR,
    REPORT_FILES,
    REQUESTS,
    SCENARIO,
    STEPS,
    RunDir,
)
from harness.rundir.read import check_requests, read_checks, read_manifest
from harness.rundir.resume import failure_cause
from harness.rundir.validation import read_validation
from harness.schema.summary import ArmFailure, ArmSummary, LaunchRecord, LoadTime, RuleResult, StepSummary, Summary
from harness.schema.windows import WindowPoint
from harness.scrape.catalog import catalog_for_engine
from harness.scrape.series import load_scrapes
from harness.scrape.telemetry.steps import with_host


def _arm_status(events: list[ArmEvent], arm: str) -> tuple[bool, ArmFailure | None, dict[str, Any]]:
    """(ran to a final state, failure, last 'ready' identity) from arms.jsonl."""
    ran = False
    failure: ArmFailure | None = None
    info: dict[str, Any] = {}
    for e in events:
        if e.arm != arm:
            continue
        if e.event == "completed":
            ran, failure = True, None
        elif e.event == "failed":
            ran = True
            f = e.failure
            phase, message = (f.phase, f.message) if f is not None else ("harness", "unknown")
            if failure_cause(e) == "harness" and phase != "harness":  # the harness's own failure, whatever the phase
                phase, message = "harness", f"during {phase}: {message}"
            failure = ArmFailure(phase=phase, message=message, log_tail=list(f.log_tail) if f is not None else [])
        elif e.event == "starting":
            info["command"] = e.command
    return ran, failure, info


def _launch_record(manifest: dict[str, Any], arm: str, run: RunDir, launcher: str) -> LaunchRecord | None:
    launches = [entry for entry in manifest.get("launches", []) if entry.get("arm") == arm]
    if not launches:
        return None
    last = launches[-1]
    compose = run.compose(arm)
    return LaunchRecord(command=last["command"], image=last.get("image"), image_digest=last.get("image_digest"),
                        launcher=launcher, config_files=last.get("config_files", {}),
                        env_keys=last.get("env_keys", []),
                        compose_file=str(compose.relative_to(run.root)) if compose.exists() else None)


def _expected(missing: list[str], has_disk: bool) -> list[str]:
    """Drop disk-tier series from what is reported missing for an arm that has no disk tier."""
    return missing if has_disk else [m for m in missing if "(disk." not in m]


def _server_side(run: RunDir, scenario: Scenario, arm_name: str, offload: bool, has_disk: bool,
                 steps: list[StepSummary], spans: dict[int, StepEntry]) -> tuple[list[StepSummary], list[str]]:
    """The steps with the server's figures for each journaled span (copies), and the series found missing."""
    from harness.scrape.samples import describe_missing, step_server_stats  # pandas

    metrics_dir = run.metrics_dir(arm_name)
    if not metrics_dir.exists():
        return steps, []
    catalog = catalog_for_engine(scenario.engine.kind, scenario.engine.image, sim_flavor=scenario.engine.sim_flavor,
                                 version=scenario.engine.version)
    series = load_scrapes(metrics_dir)
    missing: list[str] = []
    out: list[StepSummary] = []
    for step in steps:
        span = spans.get(step.index)
        if span is None:
            out.append(step)
            continue
        server, hits = step_server_stats(series, catalog, span.start_ns, span.end_ns, offload=offload, tiered=has_disk)
        server = server.model_copy(update={"missing": _expected(server.missing, has_disk)})
        hits = hits.model_copy(update={"missing": _expected(hits.missing, has_disk)})
        out.append(step.model_copy(update={"server": server, "hit_tokens": hits}))
        missing += describe_missing([*server.missing, *hits.missing])
    return out, sorted(set(missing))


def _typical_prefix_tokens(df: pd.DataFrame) -> float | None:
    if df.empty or "cached_tokens" not in df:
        return None
    cached = pd.to_numeric(df["cached_tokens"], errors="coerce").dropna()
    cached = cached[cached > 0]
    return float(cached.median()) if len(cached) else None


SIM_LAG_SHARE = 0.05  # a simulated step that lost more than this share of its time to the simulator's own CPU


def sim_lag_warning(arm: str, step: StepSummary, behind_s: float | None) -> str | None:
    """A warning when the simulator fell behind the wall clock for a noticeable share of a step (its own CPU on this
    host): every latency it served then is longer than the modelled physics, by about that share."""
    if behind_s is None or step.duration_s <= 0 or behind_s <= SIM_LAG_SHARE * step.duration_s:
        return None
    return (f"{arm} step {step.index}: the simulator fell {behind_s:.2f} s behind the wall clock in "
            f"{step.duration_s:.0f} s ({behind_s / step.duration_s:.0%}): its own CPU on this host, not modelled "
            "physics; this step's latencies and throughput are worse than the model by about that share")


def _journaled(steps: list[StepSummary], spans: dict[int, StepEntry], arm: str
               ) -> tuple[list[StepSummary], list[str]]:
    """The steps with client health, planned duration, early stops and the simulator's lag from the step journal
    (copies), and the warnings they raise."""
    warnings: list[str] = []
    out: list[StepSummary] = []
    for step in steps:
        span = spans.get(step.index)
        if span is None:
            out.append(step)
            continue
        update: dict[str, Any] = {"planned_duration_s": span.planned_duration_s, "ended_early": span.ended_early,
                                  "stop_reason": span.stop_reason or None, "sim_behind_s": span.sim_behind_s}
        if span.client is not None and span.client.model_fields_set:  # an entry's client health, unless empty
            update["client"] = span.client.model_copy(deep=True)
            if update["client"].saturated:
                warnings.append(f"{arm} step {step.index}: load generator saturated ({update['client'].note})")
        journaled = step.model_copy(update=update)
        out.append(journaled)
        lag = sim_lag_warning(arm, journaled, span.sim_behind_s)
        if lag is not None:
            warnings.append(lag)
    return out, warnings


def _arm_steps(run: RunDir, scenario: Scenario, arm: Arm, steps: list[StepSummary],
               spans: dict[int, StepEntry]) -> tuple[list[StepSummary], list[str], list[str]]:
    """One arm's step table completed from the run directory, in order: the journal, host contention (judged on
    the journal's figures), the server's scrapes, host telemetry. Returns (steps, warnings, missing series)."""
    steps, warnings = _journaled(steps, spans, arm.name)
    steps = judged_steps(scenario.rules.host_contention, steps)  # over the host-contention budget: never deciding
    steps, missing = _server_side(run, scenario, arm.name, arm.tier != "gpu-only", bool(arm.fs_tiers()), steps,
                                  spans)
    return with_host(run.metrics_dir(arm.name), steps, spans), warnings, missing


def _load_time(arm_steps: list[list[StepSummary]]) -> LoadTime:
    steps = [s for group in arm_steps for s in group]
    planned = sum(s.planned_duration_s if s.planned_duration_s is not None else s.duration_s for s in steps)
    return LoadTime(planned_s=round(planned, 3), used_s=round(sum(s.duration_s for s in steps), 3),
                    steps_ended_early=sum(1 for s in steps if s.ended_early), steps=len(steps))


def rebuild_summary(run_dir: Path) -> Summary:
    """Compute the summary from the files in ``run_dir``."""
    from harness.analysis import ArmTables, analyze_arms, derive_latencies, load_requests

    run = RunDir(run_dir)
    scenario = load_scenario(run.scenario)
    manifest = read_manifest(run)  # validated readers (harness.rundir.read, .journal): bad files name file and field
    checks = read_checks(run) + live_config_checks(run.root)  # external arms' live configurations (if any)
    events = read_arm_events(run)
    journaled = read_step_entries(run)
    step_entries = counted_entries(e for e in journaled if not e.drill)
    check_requests(run)
    all_df = derive_latencies(load_requests(run.root))
    df = counted_rows(all_df, journaled)  # the rows that count
    spans_all = [e for e in step_entries if e.step >= 0]
    confidence = scenario.rules.confidence
    tables = analyze_arms(df, scenario.slo, scenario.rules.window_s, steps=spans_all,
                          confidence=confidence) if not df.empty else {}
    warnings: list[str] = []
    missing: list[str] = []
    data: list[ArmData] = []
    planned = planned_steps(scenario)  # where two arms may be paired by plan key (else unpaired steady states)
    wins_by_arm: dict[str, list[WindowPoint]] = {}
    for arm in scenario.arms:
        table = tables.get(arm.name)
        spans = {e.step: e for e in step_entries if e.arm == arm.name and e.step >= 0}
        steps, said, lost = _arm_steps(run, scenario, arm, table.steps if table is not None else [], spans)
        warnings += said
        missing += lost
        if table is not None:
            tables[arm.name] = ArmTables(steps, table.windows)
        data.append(ArmData(arm.name, df[df["arm"] == arm.name] if not df.empty else df, steps,
                            spans={i: (e.start_ns, e.end_ns) for i, e in spans.items()}, planned=planned))
        wins_by_arm[arm.name] = table.windows if table is not None else []
    aa = tables.get(aa_name(scenario.arms[0].name))
    if aa is not None:  # the A/A re-run's steps: host contention there sets no floor
        aa_spans = {e.step: e for e in step_entries if e.arm == aa_name(scenario.arms[0].name) and e.step >= 0}
        aa_steps, said = _journaled(aa.steps, aa_spans, aa_name(scenario.arms[0].name))
        warnings += said
        tables[aa_name(scenario.arms[0].name)] = ArmTables(
            judged_steps(scenario.rules.host_contention, aa_steps), aa.windows)
    aa_spans_ns = {e.step: (e.start_ns, e.end_ns) for e in step_entries
                   if e.arm == aa_name(scenario.arms[0].name) and e.step >= 0}
    floor = noise_floor(scenario, tables, data[0], df, confidence, spans=aa_spans_ns)
    looks = scenario.steps.sequential.looks if scenario.steps.sequential.enabled else 1
    floors = floor.per_step if floor is not None else None
    evaluated: list[ArmEvaluation] = []
    without_newest: dict[str, str] = {}  # tier arm -> the arm without its newest tier (earns its keep's, value's)
    for index, arm in enumerate(scenario.arms):
        prev = data[index - 1] if index > 0 else None
        if prev is not None:
            without_newest[arm.name] = prev.name
        evaluated.append(evaluate_arm(scenario, arm, index, data[index], data[0], prev, wins_by_arm[arm.name],
                                      looks=looks, floors=floors))
    base_summary = _arm_summary(scenario, 0, events, manifest, run, data[0], evaluated[0], [])
    validation = read_validation(run.validation)
    fit = fit_screen(scenario, base_summary, checks, reuse_share(_hash_lists(data[0].df)),
                     _typical_prefix_tokens(df[df["arm"] != scenario.arms[0].name] if not df.empty else df),
                     tier_steps={d.name: d.steps for d in data[1:]}, validation=validation)
    fit_results = [fit_rule(fit)] if scenario.rules.fit_screen_decides else []
    arms = [base_summary]
    proofs = {a.name: cold_start_of(events, a.name) for a in scenario.arms}  # proof of state at each arm's start
    for index in range(1, len(scenario.arms)):
        shared = evaluated[0].breached | evaluated[index - 1].breached
        cold = cold_start_rule(proofs[scenario.arms[index].name])  # a start not shown cold holds the arm
        arms.append(_arm_summary(scenario, index, events, manifest, run, data[index], evaluated[index],
                                 fit_results + ([cold] if cold is not None else []), shared))
    proven = with_proofs(scenario, arms, all_df, validation, proofs, events)  # predicted vs measured hits
    arms, fit, warnings = proven.arms, fit + proven.items, warnings + proven.warnings
    gaps = missing_records(run, journaled, all_df)  # records the journal counts but that cannot be read
    warnings += gaps
    outcome = records_verdict(gaps) if gaps else verdict(arms)  # unreadable records: no verdict about any tier
    drills = drill_results(run, scenario, all_df, journaled)
    capacity = capacity_section(scenario, all_df, step_entries)  # steps.search: informs, not in the verdict
    value = value_section(scenario, df, all_df, step_entries, arms, capacity, validation,
                          without_newest)  # value:, informs
    arms = with_value_findings(arms, value)  # a negative marginal value: a reason that decides nothing, listed last
    if manifest.get("resumed"):
        warnings.append("this run was resumed: an arm resumed mid-way restarted on a fresh server, so its caches "
                        "did not carry over into the resumed steps")
    extra_steps = [floor.steps] if floor is not None else []
    return Summary(
        run_id=manifest["run_id"], scenario=scenario.name, scenario_hash=manifest.get("scenario_hash", ""),
        engine=scenario.engine.kind, model=scenario.engine.model, simulated=scenario.engine.kind == "sim",
        clock="virtual" if manifest.get("clock") == "virtual" else "real",
        verdict=outcome.verdict, recommended_arm=outcome.recommended_arm, exit_code=outcome.exit_code,
        verdict_reason=outcome.reason, started_at=manifest.get("started_at", ""),
        finished_at=_finished_at(events), caches_carry_over_between_steps=True,
        slo=scenario.slo.model_dump(), arms=arms, fit_screen=fit, checks=checks,
        validation=validation, drills=drills,
        noise_floor=floor, capacity=capacity, value=value, load_time=_load_time([a.steps for a in arms] + extra_steps),
        statistics=statistics_note(scenario, looks),
        warnings=warnings, records_missing=gaps, missing_metrics=sorted(set(missing)), host=manifest.get("host", {}),
        versions=manifest.get("versions", {}), files=_files(run),
    )


def _hash_lists(base_df: pd.DataFrame) -> list[Any]:
    return base_df["hash_ids"].tolist() if "hash_ids" in base_df else []


def _arm_summary(scenario: Scenario, index: int, events: list[ArmEvent], manifest: dict[str, Any],
                 run: RunDir, data: ArmData, evaluated: ArmEvaluation,
                 extra_rules: list[RuleResult], shared: set[str] | None = None) -> ArmSummary:
    arm = scenario.arms[index]
    ran, failure, _info = _arm_status(events, arm.name)
    rules = mark_shared([*evaluated.results, *extra_rules], shared or set()) if index > 0 else evaluated.results
    keep = scenario.rules.earns_keep
    effects = effect_rows(evaluated, baseline=scenario.arms[0].name,
                          min_improvement=keep.min_improvement if keep is not None else None) \
        if index > 0 and failure is None else []  # an arm that could not be judged has no effect table
    decision, reasons, findings = decide_arm(is_baseline=index == 0, failure=failure, ran=ran or bool(data.steps),
                                   rules=rules, prev_name=scenario.arms[index - 1].name if index > 0 else None,
                                   hints={**settle_hints(effects),
                                          **budget_hints(scenario.rules.budgets, rules, data.steps,
                                                         scenario.rules.confidence)})
    effects = mark_deciding(effects, decision, rules)
    return ArmSummary(name=arm.name, tier=arm.tier, decision=decision, reasons=reasons, findings=findings,
                      cpu_tier_bytes=arm.cpu_tier_bytes(), disk_tier_dirs=[t.root_dir for t in arm.fs_tiers()],
                      launch=_launch_record(manifest, arm.name, run, scenario.engine_for(arm).effective_launcher),
                      steps=data.steps, rules=rules, windows=evaluated.windows, failure=failure, effects=effects,
                      break_even=break_even(effects, data.steps))


def _finished_at(events: list[ArmEvent]) -> str:
    """When the last arm event was journaled (from the files, so a rebuild reproduces it)."""
    stamps = [e.at for e in events if e.at]
    return max(stamps) if stamps else ""


def _files(run: RunDir) -> dict[str, str]:
    """The run directory's files the summary lists (those present, and the reports it is written with)."""
    found = [MANIFEST, SCENARIO, REQUESTS, STEPS, ARMS, CHECKS, METRICS_DIR, LOGS_DIR, COMPOSE_DIR]
    return {n: n for n in [*found, *REPORT_FILES] if n in REPORT_FILES or (run.root / n).exists()}
