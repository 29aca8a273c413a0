"""Attempts of a step: which request records count when a step was run more than once.

A step interrupted (Ctrl-C, SIGTERM) or cut short by a harness-side failure (results disk full, the load generator
died) is run again by ``harness run --resume`` on a fresh server. Each try is an *attempt*, numbered per arm and step:
the first is 1, each redo one more. Every request record carries its ``attempt``, and every ``steps.jsonl`` entry the
attempt it closes.

The attempt that counts for an (arm, step) is the one of its last journal entry (a step is journaled when it ends,
completed or cut short by the server). Rows of other attempts stay in ``requests.parquet`` (measurements are never
deleted) with ``superseded`` set, and no figure uses them: the summary, ``harness report``, ``harness compare`` and
the sequential looks all read through :func:`counted_mask` / :func:`superseded_mask`. Records and entries written
before attempts existed read as attempt 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

ATTEMPT = "attempt"
SUPERSEDED = "superseded"
Key = tuple[str, int]
Mask = npt.NDArray[np.bool_]


def entry_attempt(entry: Mapping[str, Any]) -> int:
    """The attempt a journal entry (or event) names; 1 where it names none (written before attempts existed)."""
    value = entry.get(ATTEMPT)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 1


def _measured(entry: Mapping[str, Any]) -> bool:
    try:
        step = int(entry.get("step", -1))
    except (TypeError, ValueError):
        return False
    return step >= 0 and not entry.get("warmup") and not entry.get("drill")


def counted_attempts(entries: Iterable[Mapping[str, Any]]) -> dict[Key, int]:
    """Per measured (arm, step): the attempt whose records count (the latest attempt that was journaled)."""
    counted: dict[Key, int] = {}
    for e in entries:
        if not _measured(e):
            continue
        key = (str(e.get("arm")), int(e["step"]))
        counted[key] = max(counted.get(key, 0), entry_attempt(e))
    return counted


def counted_entries(entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The journal entries of counted attempts (entries of other kinds, warm-up and drills, are kept as they are)."""
    items = [dict(e) for e in entries]
    counted = counted_attempts(items)
    return [e for e in items if not _measured(e) or entry_attempt(e) == counted[(str(e["arm"]), int(e["step"]))]]


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


def superseded_mask(df: pd.DataFrame, entries: Iterable[Mapping[str, Any]]) -> Mask:
    """Rows of a measured step whose attempt is not the one that counts (a later attempt replaced it)."""
    counted = counted_attempts(entries)
    out = np.zeros(len(df), dtype=bool)
    if not counted or df.empty:
        return out
    arms, steps, measured = _keys(df)
    attempts = row_attempts(df)
    for (arm, step), attempt in counted.items():
        out |= measured & (arms == arm) & (steps == step) & (attempts != attempt)
    return out


def counted_mask(df: pd.DataFrame, entries: Iterable[Mapping[str, Any]]) -> Mask:
    """Rows that count: of a measured step's counted attempt, sent within that attempt's journaled span."""
    items = counted_entries(entries)
    out = np.zeros(len(df), dtype=bool)
    if df.empty:
        return out
    arms, steps, measured = _keys(df)
    attempts = row_attempts(df)
    send, sent = _ints(df, "send_ns", 0)
    for e in items:
        if not _measured(e):
            continue
        out |= measured & sent & (arms == str(e["arm"])) & (steps == int(e["step"])) & \
            (attempts == entry_attempt(e)) & (send >= int(e["start_ns"])) & (send <= int(e["end_ns"]))
    return out
