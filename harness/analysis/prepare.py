"""Shared plumbing for step tables and windows: which rows count, which (arm, step) group each belongs to, and the
time span and window layout of every group.

Rows of warm-up (step -1) and drills (step < -1) get group -1 and are left out of every statistic, and so are rows
``requests.parquet`` marks ``superseded`` (an attempt of the step that a later attempt replaced, see
:mod:`harness.rundir.attempts`). No DataFrame is copied per arm: rows are addressed through their group code.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from harness.analysis.latency import ensure_derived, float_column, ns_column
from harness.rundir.attempts import SUPERSEDED
from harness.rundir.entries import StepEntry, step_entries

I64 = npt.NDArray[np.int64]
StepsArg = Sequence[StepEntry | Mapping[str, Any]] | None  # steps.jsonl entries, as models or plain dicts
MAX_WINDOWS = 1_000_000


def arm_names(df: pd.DataFrame) -> list[str]:
    """The arms present, in order of first appearance."""
    if "arm" not in df.columns or len(df) == 0:
        return []
    return [str(a) for a in pd.unique(df["arm"].dropna())]


@dataclass(frozen=True)
class Prepared:
    """Derived records plus a group code per row; group ``g`` is ``groups[g] = (arm, step)``."""

    df: pd.DataFrame
    row_group: I64  # -1: not measured (warm-up, drill, another arm)
    ok: npt.NDArray[np.bool_]
    groups: list[tuple[str, int]]
    spans: list[StepEntry | None]
    start: I64  # per group, perf_counter ns
    end: I64

    def arm_groups(self, arm: str) -> list[int]:
        """The group indices of one arm, by step."""
        return [g for g, (a, _) in enumerate(self.groups) if a == arm]

    @property
    def arms(self) -> list[str]:
        """Arms with at least one group, in order."""
        return list(dict.fromkeys(a for a, _ in self.groups))


def _bounds(df: pd.DataFrame, row_group: I64, spans: list[StepEntry | None]) -> tuple[I64, I64]:
    n = len(spans)
    send, send_ok = ns_column(df, "send_ns")
    last = send.copy()
    for col in ("first_token_ns", "end_ns"):
        values, valid = ns_column(df, col)
        last = np.where(valid, np.maximum(last, values), last)
    big = np.iinfo(np.int64).max
    first_send = np.full(n, big, dtype=np.int64)
    last_seen = np.full(n, -big, dtype=np.int64)
    use = send_ok & (row_group >= 0)
    np.minimum.at(first_send, row_group[use], send[use])
    np.maximum.at(last_seen, row_group[use], last[use])
    start = np.zeros(n, dtype=np.int64)
    end = np.zeros(n, dtype=np.int64)
    for g, span in enumerate(spans):
        if span is not None:
            start[g], end[g] = span.start_ns, span.end_ns
        elif first_send[g] != big:
            start[g], end[g] = first_send[g], last_seen[g]
    return start, end


def prepare(df: pd.DataFrame, *, steps: StepsArg = None, arm: str | None = None,
            all_arms: bool = False) -> Prepared:
    """Group the measured rows of ``df`` by (arm, step).

    ``arm`` limits the groups to one arm; without it ``df`` must hold one arm unless ``all_arms`` is set.
    ``steps`` (``steps.jsonl`` entries) give exact step times and add steps that have no records.
    """
    derived = ensure_derived(df)
    present = arm_names(derived)
    spans_all = [s for s in step_entries(steps or []) if s.measured]
    if arm is not None:
        arms = [arm]
    else:
        arms = list(dict.fromkeys([*present, *(s.arm for s in spans_all)])) if all_arms else present
        if not all_arms and len(arms) > 1:
            raise ValueError(f"records of several arms ({', '.join(arms)}): pass arm=... or use analyze_arms()")
        if not all_arms and not arms:
            arms = list(dict.fromkeys(s.arm for s in spans_all))[:1] or [""]
    n = len(derived)
    step_col = np.nan_to_num(float_column(derived, "step"), nan=-1.0).astype(np.int64)
    arm_col = derived["arm"].to_numpy(dtype=object) if "arm" in derived.columns else np.full(n, None, dtype=object)
    if arm is None and not all_arms and len(present) <= 1:
        arm_col = np.full(n, arms[0] if arms else None, dtype=object)
    arm_code = np.full(n, -1, dtype=np.int64)
    for i, name in enumerate(arms):
        arm_code[arm_col == name] = i
    measured = (arm_code >= 0) & (step_col >= 0)
    if SUPERSEDED in derived.columns:
        measured &= ~derived[SUPERSEDED].fillna(False).to_numpy(dtype=bool)
    groups: list[tuple[str, int]] = []
    for i, name in enumerate(arms):
        steps_here = set(np.unique(step_col[measured & (arm_code == i)]).tolist())
        steps_here |= {s.step for s in spans_all if s.arm == name}
        groups += [(name, int(s)) for s in sorted(steps_here)]
    index = {g: k for k, g in enumerate(groups)}
    stride = int(step_col.max()) + 1 if n and measured.any() else 1
    lookup = np.full(len(arms) * stride, -1, dtype=np.int64)
    for (name, step), k in index.items():
        if step < stride:
            lookup[arms.index(name) * stride + step] = k
    row_group = np.full(n, -1, dtype=np.int64)
    row_group[measured] = lookup[arm_code[measured] * stride + step_col[measured]]
    span_of = {(s.arm, s.step): s for s in spans_all}
    spans = [span_of.get(g) for g in groups]
    start, end = _bounds(derived, row_group, spans)
    ok = np.asarray(derived["ok"].to_numpy(dtype=bool))
    return Prepared(derived, row_group, ok, groups, spans, start, end)


@dataclass(frozen=True)
class WindowLayout:
    """Windows per group: group ``g`` owns windows ``base[g] .. base[g] + count[g] - 1``."""

    window_ns: int
    count: I64
    base: I64

    @property
    def total(self) -> int:
        """Number of windows in all."""
        return int(self.count.sum())


def window_layout(prep: Prepared, window_s: float | None, min_fraction: float = 0.5) -> WindowLayout:
    """Cut every group into windows of ``window_s`` (None: one window per group); a last piece shorter than
    ``min_fraction`` of a window joins the window before it."""
    n = len(prep.groups)
    if window_s is None:
        count = np.ones(n, dtype=np.int64)
        window_ns = int(max(int((prep.end - prep.start).max()) if n else 1, 1))
    else:
        if window_s <= 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        if not 0 <= min_fraction <= 1:
            raise ValueError(f"min_fraction must be within 0..1, got {min_fraction}")
        window_ns = max(round(window_s * 1e9), 1)
        duration = np.maximum(prep.end - prep.start, 0)
        full = duration // window_ns
        rest = duration - full * window_ns
        extra = (rest >= min_fraction * window_ns) | (full == 0)
        count = np.asarray(np.maximum(full + extra.astype(np.int64), 1), dtype=np.int64)
        if n and int(count.sum()) > MAX_WINDOWS:
            worst = int(np.argmax(count))
            arm, step = prep.groups[worst]
            raise ValueError(f"arm {arm!r} step {step} spans {duration[worst] / 1e9:.0f} s: more than "
                             f"{MAX_WINDOWS:,} windows of {window_s:g} s in all; check the step times in "
                             "steps.jsonl (start_ns/end_ns are perf_counter_ns, not wall-clock) or use longer windows")
    base = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int64) if n else np.zeros(0, dtype=np.int64)
    return WindowLayout(window_ns, count, base)


def window_codes(times: I64, valid: npt.NDArray[np.bool_], group: I64, prep: Prepared,
                 layout: WindowLayout) -> I64:
    """The window of each event (time ``times`` of a row of ``group``); -1 where invalid or not measured."""
    use = valid & (group >= 0)
    g = np.where(use, group, 0)
    if len(prep.groups) == 0:
        return np.full(len(times), -1, dtype=np.int64)
    k = np.floor_divide(times - prep.start[g], layout.window_ns)
    k = np.clip(k, 0, layout.count[g] - 1)
    return np.where(use, layout.base[g] + k, -1)
