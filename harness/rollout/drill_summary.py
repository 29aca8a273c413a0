"""Drill results from the run directory: per phase errors, TTFT p99 and hit sources; pass/fail against limits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.config.scenario import Scenario
from harness.rollout import journal
from harness.rollout.drill_impl import DRILL_STEP_BASE
from harness.summary import DrillPhase, DrillResult, HitTokens


def _phase_requests(df: pd.DataFrame, entry: dict[str, Any]) -> pd.DataFrame:
    if df.empty:
        return df
    mask = (df["arm"] == entry["arm"]) & (df["step"] == int(entry["step"])) & \
        (df["send_ns"] >= int(entry["start_ns"])) & (df["send_ns"] <= int(entry["end_ns"]))
    out: pd.DataFrame = df[mask]
    return out


def _hits(run_root: Path, scenario: Scenario, arm: str, entry: dict[str, Any]) -> HitTokens:
    from harness.scrape.catalog import catalog_for_engine
    from harness.scrape.samples import step_server_stats
    from harness.scrape.series import load_scrapes

    metrics = run_root / "metrics" / arm
    if not metrics.exists():
        return HitTokens(source="none")
    catalog = catalog_for_engine(scenario.engine.kind, scenario.engine.image, sim_flavor=scenario.engine.sim_flavor)
    _server, hits = step_server_stats(load_scrapes(metrics), catalog, int(entry["start_ns"]), int(entry["end_ns"]))
    return hits


def drill_results(run_root: Path, scenario: Scenario, df: pd.DataFrame) -> list[DrillResult]:
    """One result per drill that ran."""
    events = journal.read(run_root / "drill_events.jsonl")
    steps = [e for e in journal.read(run_root / "steps.jsonl") if e.get("drill")]
    out: list[DrillResult] = []
    for number, drill in enumerate(scenario.drills):
        mine = [e for e in events if e.get("number") == number and e.get("kind") == drill.kind]
        if not mine:
            continue
        arm = str(mine[0]["arm"])
        phases: list[DrillPhase] = []
        for entry in (s for s in steps if int(s["step"]) == DRILL_STEP_BASE - number and s["arm"] == arm):
            reqs = _phase_requests(df, entry)
            ok = reqs[reqs["error_kind"].isna()] if not reqs.empty else reqs
            ttft = pd.to_numeric(ok["ttft_ms"], errors="coerce").dropna() if not ok.empty else pd.Series(dtype=float)
            phases.append(DrillPhase(phase=entry["drill_phase"], requests=len(reqs),
                                     errors=int(reqs["error_kind"].notna().sum()) if not reqs.empty else 0,
                                     ttft_p99_ms=float(np.percentile(ttft, 99)) if len(ttft) else None,
                                     hit_tokens=_hits(run_root, scenario, arm, entry)))
        details: dict[str, float | int | str | None] = {}
        for e in mine:
            for key in ("removed_entries", "ready_s", "factor", "bytes"):
                if key in e:
                    details[key] = e[key]
        final = mine[-1]
        status, message = _judge(drill, phases, final)
        out.append(DrillResult(kind=drill.kind, arm=arm, status=status, message=message, phases=phases,
                               details=details))
    return out


def _judge(drill: Any, phases: list[DrillPhase], final: dict[str, Any]) -> tuple[Any, str]:
    if final.get("status") == "skipped":
        return "skipped", str(final.get("message", ""))
    if final.get("status") == "error":
        return "error", str(final.get("message", "the drill could not complete"))
    problems = []
    for p in phases:
        rate = p.errors / p.requests if p.requests else 0.0
        if rate > drill.max_error_rate:
            problems.append(f"{p.phase}: {p.errors} of {p.requests} requests failed ({rate:.1%} > "
                            f"{drill.max_error_rate:.1%})")
        if drill.max_ttft_p99_ms is not None and p.ttft_p99_ms is not None and p.ttft_p99_ms > drill.max_ttft_p99_ms:
            problems.append(f"{p.phase}: TTFT p99 {p.ttft_p99_ms:.0f} ms > {drill.max_ttft_p99_ms:.0f} ms")
    by = {p.phase: p for p in phases}
    summary = "; ".join(
        f"{name}: {p.requests} req, {p.errors} err, TTFT p99 "
        + (f"{p.ttft_p99_ms:.0f} ms" if p.ttft_p99_ms is not None else "n/a")
        + f", disk hits {p.hit_tokens.disk if p.hit_tokens.disk is not None else 'missing'}"
        + f", recomputed {p.hit_tokens.miss if p.hit_tokens.miss is not None else 'missing'}"
        for name, p in by.items())
    if problems:
        return "fail", "; ".join(problems) + f" ({summary})"
    return "pass", summary
