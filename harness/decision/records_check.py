"""Are a run's request records all there? The journal against what can be read back, before any verdict.

``steps.jsonl`` counts the requests of every measured step (``requests``). When ``harness report`` (or the end of a
run) can read fewer of that step's records than the journal counts — a record part that is truncated, overwritten
or deleted, a ``requests.parquet`` that cannot be read — the figures and rules would be computed from a sample that
is not the one measured: the baseline's step with 41 requests journaled and 0 readable would read as "too few
samples", a quiet ``hold``. Instead :func:`missing_records` names each step with the counts and each unreadable
file, and :func:`records_verdict` makes the run's verdict ``failed`` (exit 4: not a decision, not a no-go): no tier
is judged on records that are not all there. Restoring the files, or re-running the arm, and ``harness report``
again gives the verdict.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.decision.decide import VerdictResult
from harness.rundir.attempts import counted_entries, row_attempts
from harness.rundir.entries import StepEntry
from harness.rundir.layout import RunDir

MAX_NAMED = 10  # steps and files named one by one; the rest as a count


def _unreadable(run: RunDir) -> list[str]:
    """The record files the analysis could not read (requests.parquet, or without it the parts)."""
    if run.requests.exists():
        try:
            pq.ParquetFile(run.requests).close()
            return []
        except (OSError, pa.ArrowException) as exc:
            problems = [f"{run.requests.name} cannot be read ({type(exc).__name__})"]
    else:
        problems = []
    for part in run.record_parts():
        try:
            pq.ParquetFile(part).close()
        except (OSError, pa.ArrowException) as exc:
            problems.append(f"record part {part.relative_to(run.root)} cannot be read ({type(exc).__name__})")
    return problems


def _short_steps(entries: Iterable[StepEntry], df: pd.DataFrame) -> list[str]:
    """Measured steps with fewer readable records (of their counted attempt) than the journal counts."""
    arms = df["arm"].astype(str).to_numpy(dtype=object) if "arm" in df.columns else np.zeros(0, dtype=object)
    steps = pd.to_numeric(df["step"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan) \
        if "step" in df.columns else np.zeros(0)
    attempts = row_attempts(df)
    no_drill = df["drill"].isna().to_numpy(dtype=bool) if "drill" in df.columns else np.ones(len(df), dtype=bool)
    out: list[str] = []
    for e in counted_entries(e for e in entries if e.measured):
        if not e.requests:
            continue
        found = int(np.count_nonzero((arms == e.arm) & (steps == e.step) & (attempts == e.attempt) & no_drill)) \
            if len(df) else 0
        if found < e.requests:
            out.append(f"{e.arm} step {e.step} ({e.label}): steps.jsonl counts {e.requests:,} requests, "
                       f"{found:,} records can be read")
    return out


def missing_records(run: RunDir, journaled: list[StepEntry], all_df: pd.DataFrame) -> list[str]:
    """One warning naming what is missing (steps with their counts, unreadable files), or none."""
    short = _short_steps(journaled, all_df)
    if not short:
        return []
    files = _unreadable(run)
    named = short[:MAX_NAMED] + ([f"{len(short) - MAX_NAMED} more step(s)"] if len(short) > MAX_NAMED else [])
    text = "request records are missing, so no verdict is given: " + "; ".join(named)
    if files:
        text += "; " + "; ".join(files[:MAX_NAMED]) + (f"; {len(files) - MAX_NAMED} more" if len(files) > MAX_NAMED
                                                       else "")
    return [text + ". Restore the files (or re-run the arm) and run `harness report` again"]


def records_verdict(problems: list[str]) -> VerdictResult:
    """The run's verdict when records are missing: ``failed`` (exit 4), naming what is missing."""
    return VerdictResult("failed", None, problems[0])
