"""Attempts of a step, and the request rows that count.

A step interrupted (Ctrl-C, SIGTERM) or cut short by a harness-side failure (results disk full, the load generator
died) is run again by ``harness run --resume`` on a fresh server. Each try is an *attempt*, numbered per arm and step:
the first is 1, each redo one more. Every request record carries its ``attempt``, and every ``steps.jsonl`` entry the
attempt it closes (:class:`~harness.rundir.entries.StepEntry`). Records and entries written before attempts existed
read as attempt 1.

The attempt that counts for a measured (arm, step) is the one of its last journal entry (a step is journaled when it
ends, completed or cut short by the server). The rows that count (:func:`counted_rows`, the one selection the
summary, the sequential looks and ``harness compare`` all make) are those of a measured step's counted attempt sent
within that attempt's journaled span: rows of other attempts (``superseded``: kept in ``requests.parquet``, since
measurements are never deleted), rows sent outside the span, and rows of a step that was never journaled are left
out.

The warm-up (step -1) of an arm is run again with the arm on a fresh server after ``--resume``: its rows are not
measured, but those of any warm-up attempt other than the arm's latest journaled one are ``superseded`` too
(:func:`superseded_mask`), so no reader takes two warm-ups for one.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import numpy.typing as npt
import pandas as pd

from harness.rundir.entries import StepEntry
from harness.rundir.records import WARMUP_STEP

ATTEMPT = "attempt"
SUPERSEDED = "superseded"
Key = tuple[str, int]
Mask = npt.NDArray[np.bool_]


def counted_attempts(entries: Iterable[StepEntry]) -> dict[Key, int]:
    """Per measured (arm, step): the attempt whose records count (the latest attempt that was journaled)."""
    counted: dict[Key, int] = {}
    for e in entries:
        if e.measured:
            counted[e.key] = max(counted.get(e.key, 0), e.attempt)
    return counted


def counted_entries(entries: Iterable[StepEntry]) -> list[StepEntry]:
    """The journal entries of counted attempts (entries of other kinds, warm-up, drills and probes, are kept)."""
    items = list(entries)
    counted = counted_attempts(items)
    return [e for e in items if not e.measured or e.attempt == counted[e.key]]


def _ints(df: pd.DataFrame, column: str, missing: int) -> tuple[npt.NDArray[np.int64], Mask]:
    """A column as exact int64 (64-bit clock readings keep their precision) and where it had a value."""
    if column not in df.columns:
        return np.full(len(df), missing, dtype=np.int64), np.zeros(len(df), dtype=bool)
    values = pd.to_numeric(df[column], errors="coerce")
    valid = values.notna().to_numpy(dtype=bool)
    return values.to_numpy(dtype=np.int64, na_value=missing), valid


def row_attempts(df: pd.DataFrame) -> npt.NDArray[np.int64]:
    """Each record's attempt (1 where the column is missing or empty: records from before attempts existed)."""
    return _ints(df, ATTEMPT, 1)[0]


def _keys(df: pd.DataFrame) -> tuple[npt.NDArray[np.object_], npt.NDArray[np.int64], Mask]:
    """(arm, step, measured) per row: measured rows are load steps (step >= 0) outside drills."""
    n = len(df)
    arms = df["arm"].astype(str).to_numpy(dtype=object) if "arm" in df.columns else np.full(n, "", dtype=object)
    steps = _ints(df, "step", -1)[0]
    measured = steps >= 0
    if "drill" in df.columns:
        measured &= df["drill"].isna().to_numpy(dtype=bool)
    return arms, steps, measured


def counted_warmups(entries: Iterable[StepEntry]) -> dict[str, int]:
    """Per arm: the warm-up attempt that stands (the latest one journaled)."""
    latest: dict[str, int] = {}
    for e in entries:
        if e.warmup and e.step == WARMUP_STEP and e.drill is None:
            latest[e.arm] = max(latest.get(e.arm, 0), e.attempt)
    return latest


def superseded_mask(df: pd.DataFrame, entries: Iterable[StepEntry]) -> Mask:
    """Rows of a measured step whose attempt is not the one that counts (a later attempt replaced it), and rows of
    an arm's warm-up whose attempt is not its latest journaled warm-up."""
    items = list(entries)
    counted, warmups = counted_attempts(items), counted_warmups(items)
    out = np.zeros(len(df), dtype=bool)
    if not (counted or warmups) or df.empty:
        return out
    arms, steps, measured = _keys(df)
    attempts = row_attempts(df)
    for (arm, step), attempt in counted.items():
        out |= measured & (arms == arm) & (steps == step) & (attempts != attempt)
    no_drill = df["drill"].isna().to_numpy(dtype=bool) if "drill" in df.columns else np.ones(len(df), dtype=bool)
    warm = (steps == WARMUP_STEP) & no_drill
    for arm, attempt in warmups.items():
        out |= warm & (arms == arm) & (attempts != attempt)
    return out


def counted_mask(df: pd.DataFrame, entries: Iterable[StepEntry]) -> Mask:
    """Rows that count: of a measured step's counted attempt, sent within that attempt's journaled span."""
    out = np.zeros(len(df), dtype=bool)
    if df.empty:
        return out
    arms, steps, measured = _keys(df)
    attempts = row_attempts(df)
    send, sent = _ints(df, "send_ns", 0)
    for e in counted_entries(entries):
        if e.measured:
            out |= measured & sent & (arms == e.arm) & (steps == e.step) & (attempts == e.attempt) & \
                (send >= e.start_ns) & (send <= e.end_ns)
    return out


def counted_rows(df: pd.DataFrame, entries: Iterable[StepEntry]) -> pd.DataFrame:
    """The request rows that count (:func:`counted_mask`) given the run's ``steps.jsonl`` entries (all of them, or
    those of the steps in question), renumbered from 0."""
    if df.empty:
        return df
    return df[counted_mask(df, entries)].reset_index(drop=True)
