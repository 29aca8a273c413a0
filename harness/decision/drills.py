"""Drill results from the run directory alone: per phase errors, TTFT p99 and hit sources; pass/fail against limits.

Reads ``drill_events.jsonl`` (what each drill did), the drill entries of ``steps.jsonl`` (phase spans), the request
records and the raw scrapes. Only the latest attempt of a drill counts (a resumed run runs unfinished drills again).
Restart drills also get the time from ready to the first disk hit, from the scrapes taken every 0.1 s after the
restart (the figure is the first scrape that saw the disk-hit counter rise: an upper bound within that interval).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from harness.config.drills import Drill
from harness.config.scenario import Scenario
from harness.rundir.entries import DrillEvent, StepEntry
from harness.rundir.journal import read_drill_events
from harness.rundir.layout import DRILL_STEP_BASE, RunDir
from harness.schema.summary import DrillPhase, DrillResult, HitTokens
from harness.scrape.catalog import catalog_for_engine
from harness.scrape.quantities import step_quantities
from harness.scrape.series import load_scrapes

PHASES = ("before", "during", "after")
FINAL = ("done", "error", "skipped")
MAX_SCRAPES_SCANNED = 400
Details = dict[str, float | int | str | None]


def _phase_requests(df: pd.DataFrame, entry: StepEntry) -> pd.DataFrame:
    if df.empty:
        return df
    mask = (df["arm"] == entry.arm) & (df["step"] == entry.step) & \
        (df["send_ns"] >= entry.start_ns) & (df["send_ns"] <= entry.end_ns)
    out: pd.DataFrame = df[mask]
    return out


class _Scrapes:
    """An arm's scrapes and catalog, loaded once."""

    def __init__(self, run: RunDir, scenario: Scenario, arm: str) -> None:
        metrics = run.metrics_dir(arm)
        self.series = load_scrapes(metrics) if metrics.exists() else None
        self.catalog = catalog_for_engine(scenario.engine.kind, scenario.engine.image,
                                          sim_flavor=scenario.engine.sim_flavor, version=scenario.engine.version)

    def hits(self, start_ns: int, end_ns: int) -> HitTokens:
        from harness.scrape.samples import step_server_stats  # pandas

        if self.series is None:
            return HitTokens(source="none")
        _server, hits = step_server_stats(self.series, self.catalog, start_ns, end_ns)
        return hits

    def first_disk_hit_ns(self, after_ns: int, until_ns: int) -> int | None:
        """Monotonic time of the first scrape after ``after_ns`` (up to ``until_ns``) whose disk-hit counter rose."""
        if self.series is None:
            return None
        times = [s.mono_ns for s in self.series.scrapes if after_ns < s.mono_ns <= until_ns and s.ok]
        for mono in times[:MAX_SCRAPES_SCANNED]:
            value = step_quantities(self.series, self.catalog, after_ns, mono)["hit_tokens.disk"].value
            if value is not None and value > 0:
                return mono
        return None


def _phase(df: pd.DataFrame, entry: StepEntry, scrapes: _Scrapes) -> DrillPhase:
    reqs = _phase_requests(df, entry)
    ok = reqs[reqs["error_kind"].isna()] if not reqs.empty else reqs
    ttft = pd.to_numeric(ok["ttft_ms"], errors="coerce").dropna() if not ok.empty else pd.Series(dtype=float)
    return DrillPhase(phase=entry.drill_phase, requests=len(reqs),
                      errors=int(reqs["error_kind"].notna().sum()) if not reqs.empty else 0,
                      ttft_p99_ms=float(np.percentile(ttft, 99)) if len(ttft) else None,
                      hit_tokens=scrapes.hits(entry.start_ns, entry.end_ns))


def _latest_attempt(events: list[DrillEvent]) -> list[DrillEvent]:
    starts = [e.drill_run for e in events if e.event == "start"]
    run = starts[-1] if starts else events[-1].drill_run
    return [e for e in events if e.drill_run == run]


def drill_results(run: RunDir, scenario: Scenario, df: pd.DataFrame, journaled: list[StepEntry]) -> list[DrillResult]:
    """One result per drill that started (its latest attempt); ``journaled`` is every ``steps.jsonl`` entry."""
    events = read_drill_events(run, strict=False)
    steps = [e for e in journaled if e.drill]
    out: list[DrillResult] = []
    loaded: dict[str, _Scrapes] = {}  # one parse cache per arm: drill windows overlap
    for number, drill in enumerate(scenario.drills):
        mine = [e for e in events if e.number == number and e.kind == drill.kind]
        if not mine:
            continue
        mine = _latest_attempt(mine)
        arm = mine[0].arm
        attempt = mine[0].drill_run
        entries = [s for s in steps if s.arm == arm and s.step == DRILL_STEP_BASE - number and s.drill_run == attempt]
        if arm not in loaded:
            loaded[arm] = _Scrapes(run, scenario, arm)
        scrapes = loaded[arm]
        phases = [_phase(df, e, scrapes) for name in PHASES for e in entries if e.drill_phase == name]
        details = _details(drill, mine, entries, phases, df, scrapes)
        status, message = _judge(drill, phases, mine, details)
        out.append(DrillResult(kind=drill.kind, arm=arm, status=status, message=message, phases=phases,
                               details=details))
    return out


def _details(drill: Drill, events: list[DrillEvent], entries: list[StepEntry], phases: list[DrillPhase],
             df: pd.DataFrame, scrapes: _Scrapes) -> Details:
    details: Details = {}
    actions = {e.action: e for e in events if e.event == "action"}
    if "cache_loss" in actions:
        details["removed_entries"] = actions["cache_loss"].extra("removed_entries")
        details["clear_s"] = actions["cache_loss"].extra("took_s")
    if "fill" in actions:
        details["fill_bytes"] = actions["fill"].extra("bytes")
    if "read_slowdown" in actions:
        details["read_slowdown"] = actions["read_slowdown"].extra("factor")
        details["read_slowdown_applied"] = str(bool(actions["read_slowdown"].extra("applied"))).lower()
    if "burst" in actions:
        details["burst_requests"] = actions["burst"].extra("requests")
    for entry in entries:
        if entry.drill_phase == "cool":
            cool = _phase_requests(df, entry)
            details["cool_requests"] = len(cool)
            details["cool_errors"] = int(cool["error_kind"].notna().sum()) if not cool.empty else 0
    restart = actions.get("restart")
    if restart is not None and restart.ok:
        details["restart_s"] = restart.extra("restart_s")
        details["kept_entries"] = restart.extra("kept_entries")
        after_restart = [p for p in phases if p.phase != "before"]
        if after_restart:
            first = after_restart[0].hit_tokens
            rate = first.hit_rate()
            details["warm_hit_rate"] = round(rate, 4) if rate is not None else None
            details["disk_hit_tokens_after_restart"] = first.disk
        ready = int(restart.extra("ready_ns"))
        until = max([e.end_ns for e in entries if e.drill_phase != "before"], default=ready)
        hit = scrapes.first_disk_hit_ns(ready, until)
        details["first_disk_hit_s"] = round((hit - ready) / 1e9, 3) if hit is not None else None
    return details


def _fmt_phase(p: DrillPhase) -> str:
    h = p.hit_tokens
    ttft = f"{p.ttft_p99_ms:.0f} ms" if p.ttft_p99_ms is not None else "n/a"
    disk = h.disk if h.disk is not None else "missing"
    miss = h.miss if h.miss is not None else "missing"
    return f"{p.phase}: {p.requests} req, {p.errors} err, TTFT p99 {ttft}, disk hits {disk}, recomputed {miss}"


def _headline(drill: Drill, by: dict[str, DrillPhase], details: Details) -> str:
    """One sentence on what the disruption did to where hits came from."""
    before, during = by.get("before"), by.get("during")
    if drill.kind == "cache_loss" and before and during and before.hit_tokens.disk is not None \
            and during.hit_tokens.disk is not None:
        took = details.get("clear_s")
        return (f"cache loss removed {details.get('removed_entries')} entries"
                + (f" in {took} s" if took is not None else "") + ": disk-hit tokens went from "
                f"{before.hit_tokens.disk} (before) to {during.hit_tokens.disk} (during), recomputed tokens from "
                f"{before.hit_tokens.miss} to {during.hit_tokens.miss}. ")
    if drill.kind == "restart" and "restart_s" in details:
        first = details.get("first_disk_hit_s")
        rate = details.get("warm_hit_rate")
        return (f"restarted in {details['restart_s']} s keeping {details.get('kept_entries')} disk-tier entries; "
                f"after it {details.get('disk_hit_tokens_after_restart')} disk-hit tokens, warm hit rate "
                + (f"{float(rate):.1%}" if isinstance(rate, (int, float)) else "unknown")
                + ("; no disk hit seen after the restart" if first is None else
                   f"; first disk hit within {first} s of ready") + ". ")
    return ""


def _judge(drill: Drill, phases: list[DrillPhase], events: list[DrillEvent],
           details: Details) -> tuple[Any, str]:
    finals = [e for e in events if e.event in FINAL]
    if not finals:
        return "error", "the drill did not finish (the run was interrupted or the harness stopped during it)"
    final = finals[-1]
    if final.event == "skipped":
        return "skipped", final.message or ""
    if final.event == "error":
        return "error", final.message or "the drill could not complete"
    problems = []
    for p in phases:
        rate = p.errors / p.requests if p.requests else 0.0
        if rate > drill.max_error_rate:
            problems.append(f"{p.phase}: {p.errors} of {p.requests} requests failed ({rate:.1%} > "
                            f"{drill.max_error_rate:.1%})")
        if drill.max_ttft_p99_ms is not None and p.ttft_p99_ms is not None and p.ttft_p99_ms > drill.max_ttft_p99_ms:
            problems.append(f"{p.phase}: TTFT p99 {p.ttft_p99_ms:.0f} ms > {drill.max_ttft_p99_ms:.0f} ms")
    during = [p for p in phases if p.phase == "during"]
    if drill.kind == "cache_loss" and during and during[0].requests == 0:
        return "error", (f"no request was sent in the {drill.during_s:g} s after the cache was cleared (clearing took "
                         f"{details.get('clear_s')} s); raise during_s")
    if "cool_errors" in details and int(details["cool_errors"] or 0) > 0:
        problems.append(f"cool: {details['cool_errors']} of {details.get('cool_requests')} requests failed")
    text = _headline(drill, {p.phase: p for p in phases}, details) + "; ".join(_fmt_phase(p) for p in phases)
    if problems:
        return "fail", "; ".join(problems) + f" ({text})"
    return "pass", text
