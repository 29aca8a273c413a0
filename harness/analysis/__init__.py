"""Client-side analysis with pandas/numpy: per-step percentiles, throughput, goodput, hit classes, windowed p99s.

Typical use (what ``harness report`` does)::

    df = derive_latencies(load_requests(run_dir))
    spans = read_steps(RunDir(run_dir).steps)
    tables = analyze_arms(df, scenario.slo, scenario.rules.window_s, steps=spans)
    tables["cpu"].steps, tables["cpu"].windows

or per arm: ``step_table(arm_df, slo, steps=spans)`` and ``windows(arm_df, window_s, steps=spans)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from harness.analysis.gapstats import gap_stats
from harness.analysis.latency import Gaps, chunk_gaps, derive_latencies, ensure_derived
from harness.analysis.load import StepSpan, load_requests, read_steps
from harness.analysis.prepare import prepare, window_layout
from harness.analysis.steptable import step_table, summaries
from harness.analysis.windows import points, windows
from harness.config.rules import SloSpec
from harness.schema.summary import StepSummary, WindowPoint
from harness.stats.intervals import DEFAULT_CONFIDENCE

__all__ = ["ArmTables", "Gaps", "StepSpan", "analyze_arms", "chunk_gaps", "derive_latencies", "load_requests",
           "read_steps", "step_table", "windows"]


@dataclass(frozen=True)
class ArmTables:
    """One arm's client-side step table and window series."""

    steps: list[StepSummary]
    windows: list[WindowPoint]


def analyze_arms(df: pd.DataFrame, slo: SloSpec, window_s: float, *,
                 steps: Sequence[StepSpan | Mapping[str, Any]] | None = None,
                 min_fraction: float = 0.5, confidence: float = DEFAULT_CONFIDENCE) -> dict[str, ArmTables]:
    """Step tables and windows of every arm in ``df`` and ``steps`` (one pass over the chunk times); every percentile
    with its ``confidence`` interval."""
    prep = prepare(ensure_derived(df), steps=steps, all_arms=True)
    layout = window_layout(prep, window_s, min_fraction)
    gaps = gap_stats(prep, layout)
    tables, series = summaries(prep, slo, gaps, confidence), points(prep, layout, gaps, confidence)
    return {arm: ArmTables(tables[arm], series[arm]) for arm in prep.arms}
