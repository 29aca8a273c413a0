"""Capacity at SLO from the journal: each probe's percentile interval and outcome, each arm's capacity, and the tier
against the baseline in words — the same code during the run (one probe at a time) and in ``harness report``.

A probe is a journaled step (``steps.jsonl``, index :func:`harness.decision.capacity.probe_index`, a ``search``
object with the session and load); its records are those of its attempt sent inside its span. Its statistics come
from the same step table as the fixed steps (:func:`harness.analysis.analyze_arms`). When an arm's search ran more
than once (a resumed run) the latest session counts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from harness.config.scenario import Scenario
from harness.config.search import SearchSpec, fmt_load, fmt_ms, slo_text
from harness.decision.capacity import Probe, conclude, is_probe_index, judge
from harness.rundir.attempts import row_attempts
from harness.rundir.entries import StepEntry
from harness.schema.capacity import CapacityArm, CapacityProbe, CapacitySection
from harness.schema.intervals import Percentiles
from harness.schema.summary import StepSummary

TIER_WORDS = {"gpu-only": "the baseline", "cpu": "the CPU tier", "tiered": "the CPU+disk tier"}
VERDICT_NOTE = ("Capacity at SLO informs the decision; it does not change the verdict, which the rules judge on the "
                "fixed steps.")


def probe_entries(entries: Sequence[StepEntry], arm: str) -> list[StepEntry]:
    """The arm's probes of its latest search session, in the order they ran."""
    mine = [e for e in entries if e.arm == arm and is_probe_index(e.step)]
    if not mine:
        return []
    latest = max(session(e) for e in mine)
    return sorted((e for e in mine if session(e) == latest), key=lambda e: -e.step)


def session(entry: StepEntry) -> int:
    """The search session a probe entry belongs to (1 when it names none)."""
    search = entry.search
    return search.session if search is not None else 1


def _probe_frame(df: pd.DataFrame, entries: Sequence[StepEntry]) -> tuple[pd.DataFrame, list[StepEntry]]:
    """The probes' records renumbered as steps 0..n-1 (of their own arm), with matching spans."""
    frames: list[pd.DataFrame] = []
    spans: list[StepEntry] = []
    if df.empty:
        return df, []
    attempts = row_attempts(df)
    send = pd.to_numeric(df["send_ns"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    steps = pd.to_numeric(df["step"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    arms = df["arm"].astype(str).to_numpy(dtype=object)
    for k, entry in enumerate(entries):
        keep = ((arms == entry.arm) & (steps == entry.step) & (attempts == entry.attempt)
                & (send >= entry.start_ns) & (send <= entry.end_ns))
        part = df[keep].copy()
        part["step"] = k
        frames.append(part)
        spans.append(StepEntry(arm=entry.arm, step=k, label=entry.label, concurrency=entry.concurrency,
                               rate_rps=entry.rate_rps, start_ns=entry.start_ns, end_ns=entry.end_ns,
                               start_wall_ns=entry.start_wall_ns, end_wall_ns=entry.end_wall_ns))
    out = pd.concat(frames, ignore_index=True) if frames else df.iloc[0:0]
    return out.drop(columns=["superseded"], errors="ignore"), spans


def probe_step_summaries(scenario: Scenario, df: pd.DataFrame, probes: Sequence[StepEntry]) -> list[StepSummary | None]:
    """Each probe's step figures (None for a probe with no step table), in the order of ``probes``."""
    from harness.analysis import analyze_arms

    entries = list(probes)
    if not entries:
        return []
    out: list[StepSummary | None] = [None] * len(entries)
    by_arm: dict[str, list[int]] = {}
    for i, entry in enumerate(entries):
        by_arm.setdefault(entry.arm, []).append(i)
    for arm, positions in by_arm.items():
        frame, spans = _probe_frame(df, [entries[i] for i in positions])
        tables = analyze_arms(frame, scenario.slo, scenario.rules.window_s, steps=spans,
                              confidence=scenario.rules.confidence)
        table = tables.get(arm)
        for step in table.steps if table is not None else []:
            if 0 <= step.index < len(positions):
                out[positions[step.index]] = step
    return out


def probe_result(spec: SearchSpec, probe: StepEntry, step: StepSummary | None) -> CapacityProbe:
    """One probe judged against the budget."""
    entry = probe
    search = entry.search
    load = float((search.load if search is not None else None) or entry.concurrency or entry.rate_rps or 0.0)
    key = f"p{spec.percentile}"
    perc: Percentiles | None = getattr(step, f"{spec.metric}_ms") if step is not None else None
    ci = perc.ci(key) if perc is not None else None
    requests = step.requests if step is not None else entry.requests or 0
    errors = step.errors if step is not None else entry.errors or 0
    outcome, reason = judge(ci, spec.budget_ms, requests, errors, spec.max_error_rate)
    return CapacityProbe(step=entry.step, label=entry.label, load=load, requests=requests,
                         errors=errors, n=ci.n if ci is not None else 0,
                         duration_s=step.duration_s if step is not None else 0.0,
                         value_ms=getattr(perc, key, None) if perc is not None else None, ci=ci, outcome=outcome,
                         extended=search is not None and search.extended, reason=reason,
                         client_saturated=entry.client is not None and entry.client.saturated)


def interval_text(probe: CapacityProbe) -> str:
    """``p99 1.62 s [1.41 s, 1.83 s]`` (an end the sample cannot bound shows as ``?``)."""
    ci = probe.ci
    span = f"[{fmt_ms(ci.lo)}, {fmt_ms(ci.hi)}]" if ci is not None else "[no samples]"
    return f"{fmt_ms(probe.value_ms)} {span}"


def _at(probes: Sequence[CapacityProbe], load: float | None) -> CapacityProbe | None:
    """The probe that counts at ``load`` (the last one there)."""
    hits = [p for p in probes if p.load == load]
    return hits[-1] if hits else None


def arm_capacity(spec: SearchSpec, kind: str, arm: str, probes: list[CapacityProbe]) -> CapacityArm:
    """The arm's capacity and a sentence with the figures it rests on."""
    found = conclude(spec, kind, [Probe(p.load, p.outcome, p.extended) for p in probes])
    slo, pct = slo_text(spec), f"p{spec.percentile}"
    met, bad = _at(probes, found.capacity), _at(probes, found.not_met)
    if found.status == "not-run":
        message = f"{arm}: no capacity probe ran (the arm failed or the run ended first)"
    elif found.status == "none-met":
        lowest = min(probes, key=lambda p: p.load)
        where = _at(probes, lowest.load) or lowest
        message = (f"{arm}: no probed load met {slo}; the lowest, {fmt_load(kind, where.load)}, had {pct} "
                   f"{interval_text(where)} ({where.outcome}: {where.reason})")
    elif found.status == "at-least-high":
        message = (f"{arm} holds at least {fmt_load(kind, found.capacity)} (the top of the searched range) at {slo}: "
                   f"{pct} {interval_text(met) if met else '?'}")
    else:
        message = f"{arm} holds {fmt_load(kind, found.capacity)} at {slo}: {pct} {interval_text(met) if met else '?'}"
        if bad is not None:
            message += f"; {fmt_load(kind, bad.load)} did not ({bad.outcome}: {pct} {interval_text(bad)})"
        else:
            message += "; no higher load was probed"
    saturated = sorted({p.load for p in probes if p.client_saturated})
    if saturated:
        message += (f"; the load generator was saturated at {', '.join(fmt_load(kind, x) for x in saturated)}: those "
                    "probes' latencies include client delay (add load processes)")
    if found.status in ("found", "none-met") and not found.complete:
        message += (f" — the search stopped after {len(probes)} probe(s) (max_probes or max_search_s) before its "
                    "bracket reached the resolution")
    return CapacityArm(arm=arm, status=found.status, capacity=found.capacity, not_met=found.not_met,
                       complete=found.complete, message=message, probes=probes)


def _cap_words(kind: str, cap: CapacityArm, bare: bool = False) -> str:
    if cap.status == "not-run":
        return "was not searched"
    if cap.status == "none-met":
        return "none of the probed loads" if bare else "holds none of the probed loads"
    text = fmt_load(kind, cap.capacity)
    text = f"at least {text}" if cap.status == "at-least-high" else text
    return text if bare else f"holds {text}"


def comparison(scenario: Scenario, spec: SearchSpec, kind: str, caps: list[CapacityArm]) -> list[str]:
    """Each tier arm against the baseline, in words (``the CPU tier holds 48 users at p99 TTFT ≤ 2 s; the
    baseline 32``), with whether the difference is shown by the probes."""
    if len(caps) < 2:
        return []
    base = caps[0]
    out = []
    for arm, cap in zip(scenario.arms[1:], caps[1:], strict=False):
        base_name = "the baseline" + ("" if base.arm == "baseline" else f" ({base.arm})")
        line = (f"{_who(arm.tier, arm.name)} {_cap_words(kind, cap)} at {slo_text(spec)}; {base_name} "
                f"{_cap_words(kind, base, bare=True)}")
        line += _difference(kind, cap, base)
        out.append(line)
    return out


def _who(tier: str, name: str) -> str:
    words = TIER_WORDS.get(tier, tier)
    return words if words.endswith(name) else f"{words} ({name})"


def _difference(kind: str, cap: CapacityArm, base: CapacityArm) -> str:
    if cap.status == "not-run" or base.status == "not-run":
        return ""
    if cap.capacity is not None and (base.capacity is None or cap.capacity > base.capacity):
        if base.not_met is not None and cap.capacity >= base.not_met:
            ratio = f" ({cap.capacity / base.capacity:.2f}x)" if base.capacity else ""
            return f" — more{ratio}: it met {fmt_load(kind, cap.capacity)}, where the baseline did not meet " \
                   f"{fmt_load(kind, base.not_met)}"
        return " — higher, but within the baseline's bracket (not shown to differ)"
    if base.capacity is not None and (cap.capacity is None or base.capacity > cap.capacity):
        if cap.not_met is not None and base.capacity >= cap.not_met:
            return f" — less: the baseline met {fmt_load(kind, base.capacity)}, where this arm did not"
        return " — lower, but within this arm's bracket (not shown to differ)"
    return " — the same capacity at this resolution"


def capacity_section(scenario: Scenario, df: pd.DataFrame, entries: Sequence[StepEntry]) -> CapacitySection | None:
    """The summary's capacity section (None without ``steps.search``)."""
    spec = scenario.steps.search
    if spec is None:
        return None
    kind = scenario.steps.search_kind
    per_arm = [probe_entries(entries, arm.name) for arm in scenario.arms]
    flat = [e for group in per_arm for e in group]
    steps = probe_step_summaries(scenario, df, flat)
    caps, pos = [], 0
    for arm, group in zip(scenario.arms, per_arm, strict=True):
        probes = [probe_result(spec, e, steps[pos + i]) for i, e in enumerate(group)]
        pos += len(group)
        caps.append(arm_capacity(spec, kind, arm.name, probes))
    return CapacitySection(metric=spec.metric, percentile=spec.percentile, budget_ms=spec.budget_ms,
                           kind="concurrency" if kind == "concurrency" else "rate", low=spec.low, high=spec.high,
                           confidence=scenario.rules.confidence, arms=caps,
                           comparison=comparison(scenario, spec, kind, caps), note=VERDICT_NOTE)
