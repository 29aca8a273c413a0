"""Build ``summary.json`` from a run directory alone (what ``harness report RUN_DIR`` re-runs).

Reads: scenario.yaml, manifest.json, checks.json, arms.jsonl, steps.jsonl, request records, raw scrapes. Only
requests of a step's counted attempt inside its journaled time span count (so an interrupted, resumed step is not
counted twice; :mod:`harness.rundir.attempts`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from harness.config import load_scenario
from harness.config.scenario import Scenario
from harness.decision.capacity_summary import capacity_section
from harness.decision.decide import decide_arm, mark_shared, verdict
from harness.decision.drills import drill_results
from harness.decision.evaluate import ArmData, evaluate_arm_rules
from harness.decision.live_config import live_config_checks
from harness.decision.noise_floor import noise_floor, statistics_note
from harness.decision.rules.causal import fit_rule
from harness.decision.rules.fit import fit_screen, reuse_share
from harness.rundir.attempts import counted_entries
from harness.rundir.layout import RunDir
from harness.rundir.read import check_requests, read_arm_events, read_checks, read_manifest, read_step_entries
from harness.rundir.resume import failure_cause
from harness.schema.summary import (
    ArmFailure,
    ArmSummary,
    ClientHealth,
    LaunchRecord,
    LoadTime,
    RuleResult,
    StepSummary,
    Summary,
    WindowPoint,
)
from harness.scrape.telemetry.steps import attach_host


def _journaled_requests(df: pd.DataFrame, steps: list[dict[str, Any]]) -> pd.DataFrame:
    """Keep records of each journaled (arm, step)'s counted attempt whose send time lies in that attempt's span."""
    from harness.rundir.attempts import counted_mask

    if df.empty:
        return df
    return df[counted_mask(df, steps)].reset_index(drop=True)


def _arm_status(events: list[dict[str, Any]], arm: str) -> tuple[bool, ArmFailure | None, dict[str, Any]]:
    """(ran to a final state, failure, last 'ready' identity) from arms.jsonl."""
    ran = False
    failure: ArmFailure | None = None
    info: dict[str, Any] = {}
    for e in events:
        if e.get("arm") != arm:
            continue
        if e.get("event") == "completed":
            ran, failure = True, None
        elif e.get("event") == "failed":
            ran = True
            f = e.get("failure") or {}
            phase, message = f.get("phase", "harness"), str(f.get("message", "unknown"))
            if failure_cause(e) == "harness" and phase != "harness":  # the harness's own failure, whatever the phase
                phase, message = "harness", f"during {phase}: {message}"
            failure = ArmFailure(phase=phase, message=message, log_tail=[str(x) for x in f.get("log_tail", [])])
        elif e.get("event") == "starting":
            info["command"] = e.get("command")
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
                 steps: list[StepSummary], spans: dict[int, dict[str, Any]]) -> list[str]:
    from harness.scrape.catalog import catalog_for_engine
    from harness.scrape.samples import describe_missing, step_server_stats
    from harness.scrape.series import load_scrapes

    metrics_dir = run.metrics_dir(arm_name)
    if not metrics_dir.exists():
        return []
    catalog = catalog_for_engine(scenario.engine.kind, scenario.engine.image, sim_flavor=scenario.engine.sim_flavor)
    series = load_scrapes(metrics_dir)
    missing: list[str] = []
    for step in steps:
        span = spans.get(step.index)
        if span is None:
            continue
        server, hits = step_server_stats(series, catalog, int(span["start_ns"]), int(span["end_ns"]), offload=offload,
                                         tiered=has_disk)
        server.missing = _expected(server.missing, has_disk)
        hits.missing = _expected(hits.missing, has_disk)
        step.server, step.hit_tokens = server, hits
        missing += describe_missing([*server.missing, *hits.missing])
    return sorted(set(missing))


def _typical_prefix_tokens(df: pd.DataFrame) -> float | None:
    if df.empty or "cached_tokens" not in df:
        return None
    cached = pd.to_numeric(df["cached_tokens"], errors="coerce").dropna()
    cached = cached[cached > 0]
    return float(cached.median()) if len(cached) else None


def _steps_with_spans(steps: list[StepSummary], spans: dict[int, dict[str, Any]], arm: str,
                      warnings: list[str]) -> None:
    """Client health, planned duration and early stops from the step journal."""
    for step in steps:
        span = spans.get(step.index)
        if span is None:
            continue
        if span.get("client"):
            step.client = ClientHealth.model_validate(span["client"])
            if step.client.saturated:
                warnings.append(f"{arm} step {step.index}: load generator saturated ({step.client.note})")
        planned = span.get("planned_duration_s")
        step.planned_duration_s = float(planned) if isinstance(planned, int | float) else None
        step.ended_early = bool(span.get("ended_early"))
        step.stop_reason = str(span["stop_reason"]) if span.get("stop_reason") else None


def _load_time(arm_steps: list[list[StepSummary]]) -> LoadTime:
    steps = [s for group in arm_steps for s in group]
    planned = sum(s.planned_duration_s if s.planned_duration_s is not None else s.duration_s for s in steps)
    return LoadTime(planned_s=round(planned, 3), used_s=round(sum(s.duration_s for s in steps), 3),
                    steps_ended_early=sum(1 for s in steps if s.ended_early), steps=len(steps))


def rebuild_summary(run_dir: Path) -> Summary:
    """Compute the summary from the files in ``run_dir``."""
    from harness.analysis import analyze_arms, derive_latencies, load_requests

    run = RunDir(run_dir)
    scenario = load_scenario(run.scenario)
    manifest = read_manifest(run)  # validated readers (harness.rundir.read): bad files name file and field
    checks = read_checks(run) + live_config_checks(run.root)  # external arms' live configurations (if any)
    events = read_arm_events(run)
    step_entries = counted_entries(e for e in read_step_entries(run) if not e.get("drill"))
    check_requests(run)
    raw_df = load_requests(run.root)
    df = derive_latencies(raw_df)
    spans_all = [e for e in step_entries if int(e["step"]) >= 0]
    df = _journaled_requests(df, spans_all)
    confidence = scenario.rules.confidence
    tables = analyze_arms(df, scenario.slo, scenario.rules.window_s, steps=spans_all,
                          confidence=confidence) if not df.empty else {}
    warnings: list[str] = []
    missing: list[str] = []
    data: list[ArmData] = []
    wins_by_arm: dict[str, list[WindowPoint]] = {}
    for arm in scenario.arms:
        table = tables.get(arm.name)
        steps = table.steps if table is not None else []
        spans = {int(e["step"]): e for e in step_entries if e["arm"] == arm.name and int(e["step"]) >= 0}
        _steps_with_spans(steps, spans, arm.name, warnings)
        missing += _server_side(run, scenario, arm.name, arm.tier != "gpu-only", bool(arm.fs_tiers()), steps, spans)
        attach_host(run.metrics_dir(arm.name), steps, spans)  # host telemetry per step (harness.scrape.telemetry)
        data.append(ArmData(arm.name, df[df["arm"] == arm.name] if not df.empty else df, steps))
        wins_by_arm[arm.name] = table.windows if table is not None else []
    floor = noise_floor(scenario, tables, data[0], df, confidence)
    looks = scenario.steps.sequential.looks if scenario.steps.sequential.enabled else 1
    floors = floor.per_step if floor is not None else None
    evaluated = []
    for index, arm in enumerate(scenario.arms):
        prev = data[index - 1] if index > 0 else None
        rules, wins, breaches = evaluate_arm_rules(scenario, arm, index, data[index], data[0], prev,
                                                   wins_by_arm[arm.name], looks=looks, floors=floors)
        evaluated.append((rules, wins, breaches))
    base_summary = _arm_summary(scenario, 0, events, manifest, run, data[0], evaluated[0], [])
    fit = fit_screen(scenario, base_summary, checks, reuse_share(_hash_lists(data[0].df)),
                     _typical_prefix_tokens(df[df["arm"] != scenario.arms[0].name] if not df.empty else df))
    fit_results = [fit_rule(fit)] if scenario.rules.fit_screen_decides else []
    arms = [base_summary]
    for index in range(1, len(scenario.arms)):
        shared = evaluated[0][2] | evaluated[index - 1][2]
        arms.append(_arm_summary(scenario, index, events, manifest, run, data[index], evaluated[index],
                                 fit_results, shared))
    outcome = verdict(arms)
    all_df = derive_latencies(raw_df) if scenario.drills or scenario.steps.search else df
    drills = drill_results(run.root, scenario, all_df)
    capacity = capacity_section(scenario, all_df, step_entries)  # steps.search: informs, not in the verdict
    if manifest.get("resumed"):
        warnings.append("this run was resumed: an arm resumed mid-way restarted on a fresh server, so its caches "
                        "did not carry over into the resumed steps")
    extra_steps = [floor.steps] if floor is not None else []
    return Summary(
        run_id=manifest["run_id"], scenario=scenario.name, scenario_hash=manifest.get("scenario_hash", ""),
        engine=scenario.engine.kind, model=scenario.engine.model, simulated=scenario.engine.kind == "sim",
        verdict=outcome.verdict, recommended_arm=outcome.recommended_arm, exit_code=outcome.exit_code,
        verdict_reason=outcome.reason, started_at=manifest.get("started_at", ""),
        finished_at=_finished_at(events), caches_carry_over_between_steps=True,
        slo=scenario.slo.model_dump(), arms=arms, fit_screen=fit, checks=checks, drills=drills,
        noise_floor=floor, capacity=capacity, load_time=_load_time([a.steps for a in arms] + extra_steps),
        statistics=statistics_note(scenario, looks),
        warnings=warnings, missing_metrics=sorted(set(missing)), host=manifest.get("host", {}),
        versions=manifest.get("versions", {}), files=_files(run),
    )


def _hash_lists(base_df: pd.DataFrame) -> list[Any]:
    return base_df["hash_ids"].tolist() if "hash_ids" in base_df else []


def _arm_summary(scenario: Scenario, index: int, events: list[dict[str, Any]], manifest: dict[str, Any],
                 run: RunDir, data: ArmData, evaluated: tuple[list[RuleResult], list[WindowPoint], set[str]],
                 extra_rules: list[RuleResult], shared: set[str] | None = None) -> ArmSummary:
    arm = scenario.arms[index]
    ran, failure, _info = _arm_status(events, arm.name)
    rules, wins, _breaches = evaluated
    rules = mark_shared([*rules, *extra_rules], shared or set()) if index > 0 else rules
    decision, reasons = decide_arm(is_baseline=index == 0, failure=failure, ran=ran or bool(data.steps),
                                   rules=rules, prev_name=scenario.arms[index - 1].name if index > 0 else None)
    return ArmSummary(name=arm.name, tier=arm.tier, decision=decision, reasons=reasons,
                      cpu_tier_bytes=arm.cpu_tier_bytes(), disk_tier_dirs=[t.root_dir for t in arm.fs_tiers()],
                      launch=_launch_record(manifest, arm.name, run, scenario.engine_for(arm).effective_launcher),
                      steps=data.steps, rules=rules, windows=wins, failure=failure)


def _finished_at(events: list[dict[str, Any]]) -> str:
    """When the last arm event was journaled (from the files, so a rebuild reproduces it)."""
    stamps = [str(e["at"]) for e in events if e.get("at")]
    return max(stamps) if stamps else ""


def _files(run: RunDir) -> dict[str, str]:
    names = ["manifest.json", "scenario.yaml", "requests.parquet", "steps.jsonl", "arms.jsonl", "checks.json",
             "metrics", "logs", "compose", "summary.json", "summary.md", "junit.xml", "report.html"]
    return {n: n for n in names if (run.root / n).exists() or n in ("summary.json", "summary.md", "junit.xml",
                                                                      "report.html")}
