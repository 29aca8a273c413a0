"""Where a step's throughput comes from, in order: declared (``steps.levels[i].expected_rps``), measured
(``harness plan --from-run RUN_DIR``: a previous run's ``steps.jsonl`` / ``summary.json``), calibrated (``--calibrate``
on the simulator, :mod:`harness.run.calibrate`), offered (an open-loop level's ``rate_rps``, if the server keeps
up), or a level bounded only by a request count; otherwise unknown. Never an invented figure.

A measured rate is the successful requests of a step over its duration, the **smallest over the run's arms** at
that level (the comparison rules need the count on each side). The run's latency spread (lognormal sigma per metric,
from each step's p50 and p95 in ``summary.json``) is its median over arms and steps.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from harness.config.steps import StepLevel
from harness.plan.power.model import LevelRate, PowerInput, Throughput
from harness.plan.power.resolve import sigma_from_quantiles
from harness.rundir.entries import StepEntry
from harness.rundir.journal import read_step_entries
from harness.rundir.layout import RunDir

METRICS = ("ttft", "itl", "e2e")


class PowerInputError(ValueError):
    """Bad input to the power estimate (a run directory that cannot be read, --calibrate off the simulator)."""


def _label(entry: dict[str, Any]) -> str | None:
    label = entry.get("label")
    return str(label) if label else None


def _from_journal(entries: list[StepEntry]) -> dict[str, dict[str, float]]:
    """``{label: {arm: rps}}`` from ``steps.jsonl`` (measured steps only: no warm-up, drills or partial steps)."""
    out: dict[str, dict[str, float]] = {}
    for e in entries:
        if not e.measured or e.partial:
            continue
        ok = (e.requests or 0) - (e.errors or 0)
        if e.label and e.duration_s > 0:
            out.setdefault(e.label, {})[e.arm] = max(ok, 0) / e.duration_s
    return out


def _from_summary(data: dict[str, Any]) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """``({label: {arm: rps}}, {metric: sigma})`` from a parsed ``summary.json``."""
    rates: dict[str, dict[str, float]] = {}
    spreads: dict[str, list[float]] = {m: [] for m in METRICS}
    for arm in data.get("arms") or []:
        if not isinstance(arm, dict):
            continue
        for step in arm.get("steps") or []:
            if not isinstance(step, dict):
                continue
            label, duration = _label(step), step.get("duration_s")
            ok = (step.get("requests") or 0) - (step.get("errors") or 0)
            if label and isinstance(duration, (int, float)) and duration > 0 and isinstance(ok, (int, float)):
                rates.setdefault(label, {})[str(arm.get("name", "?"))] = max(ok, 0) / float(duration)
            for metric in METRICS:
                perc = step.get(f"{metric}_ms")
                if isinstance(perc, dict):
                    sigma = sigma_from_quantiles(perc.get("p50"), perc.get("p95"))
                    if sigma is not None:
                        spreads[metric].append(sigma)
    return rates, {m: round(statistics.median(v), 3) for m, v in spreads.items() if v}


def read_run(run_dir: Path) -> Throughput:
    """Rates and spreads of a previous run; :class:`PowerInputError` with the fix when it cannot be read."""
    where = f"--from-run {run_dir}"
    if not run_dir.is_dir():
        raise PowerInputError(f"{where}: no such directory (give a results/<run-id>/ directory)")
    run = RunDir(run_dir)
    journal, summary = run.steps, run.summary_json
    if not journal.is_file() and not summary.is_file():
        raise PowerInputError(f"{where}: neither {journal.name} nor {summary.name} is there; is it a run directory?")
    rates: dict[str, dict[str, float]] = {}
    sigma: dict[str, float] = {}
    used = []
    if summary.is_file():
        try:
            data = json.loads(summary.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
            raise PowerInputError(f"{where}: {summary.name} cannot be read ({exc}); rebuild it with "
                                  f"`harness report {run_dir}`") from None
        if not isinstance(data, dict):
            raise PowerInputError(f"{where}: {summary.name} is not a JSON object")
        rates, sigma = _from_summary(data)
        used.append(summary.name)
    if journal.is_file():
        journaled = _from_journal(read_step_entries(run, strict=False))
        if journaled:
            rates = journaled  # the journal is what the load generator saw, step by step
            used.insert(0, journal.name)
    if not rates:
        raise PowerInputError(f"{where}: no measured step (requests and duration) in {' or '.join(used)}")
    by_label = {label: LevelRate(rps=round(min(arms.values()), 3), source="measured",
                                 detail=f"{run_dir.name}: {min(arms, key=lambda a: arms[a])} (slowest of "
                                 f"{len(arms)} arm(s)) at {label}") for label, arms in rates.items()}
    return Throughput(source="measured", detail=f"{run_dir} ({', '.join(used)})", by_label=by_label, sigma=sigma)


def level_rate(level: StepLevel, given: PowerInput) -> LevelRate:
    """The level's rate from the first source that has one (see module docs)."""
    if level.expected_rps is not None:
        return LevelRate(rps=level.expected_rps, source="declared", detail="steps.levels[].expected_rps")
    for found in (given.measured, given.calibrated):
        if found is not None and level.label in found.by_label:
            return found.by_label[level.label]
    if level.rate_rps is not None:
        return LevelRate(rps=level.rate_rps, source="offered", detail="the open-loop rate_rps (if the server keeps up)")
    if level.duration_s is None and level.requests is not None:
        return LevelRate(rps=None, source="requests", detail="bounded by its request count")
    measured = [t for t in (given.measured, given.calibrated) if t is not None]
    seen = "; ".join(f"{t.detail} measured {', '.join(sorted(t.by_label)) or 'nothing'}" for t in measured)
    return LevelRate(rps=None, source="none", detail=f"unknown at {level.label}" + (f" ({seen})" if seen else ""))
