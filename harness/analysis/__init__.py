"""Client-side analysis with pandas/numpy: per-step percentiles, throughput, goodput, hit classes, windowed percentiles.

Typical use (what ``harness report`` does)::

    df = derive_latencies(load_requests(run_dir))
    spans = read_step_entries(RunDir(run_dir))  # harness.rundir.journal
    tables = analyze_arms(df, scenario.slo, scenario.rules.window_s, steps=spans)
    tables["cpu"].steps, tables["cpu"].windows

or per arm: ``step_table(arm_df, slo, steps=spans)`` and ``windows(arm_df, window_s, steps=spans)``. Each step's
steady state (the transient cut by MSER-5, the sample and window every comparison between arms uses) is
:mod:`harness.analysis.steady`, recorded on the step as ``StepSummary.steady_state``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from harness.analysis.gapstats import gap_stats
from harness.analysis.latency import Gaps, chunk_gaps, derive_latencies, ensure_derived
from harness.analysis.load import load_requests
from harness.analysis.prepare import prepare, window_layout
from harness.analysis.steptable import step_table, summaries
from harness.analysis.windows import points, windows
from harness.config.rules import BUDGET_PERCENTILES, SloSpec
from harness.rundir.entries import StepEntry
from harness.schema.summary import StepSummary
from harness.schema.windows import WindowPoint
from harness.stats.intervals import DEFAULT_CONFIDENCE

__all__ = ["ArmTables", "Gaps", "analyze_arms", "chunk_gaps", "derive_latencies", "load_requests", "step_table",
           "windows"]


@dataclass(frozen=True)
class ArmTables:
    """One arm's client-side step table and window series."""

    steps: list[StepSummary]
    windows: list[WindowPoint]


def analyze_arms(df: pd.DataFrame, slo: SloSpec, window_s: float, *,
                 steps: Sequence[StepEntry | Mapping[str, Any]] | None = None,
                 min_fraction: float = 0.5, confidence: float = DEFAULT_CONFIDENCE,
                 window_percentiles: Sequence[float] = BUDGET_PERCENTILES) -> dict[str, ArmTables]:
    """Step tables and windows of every arm in ``df`` and ``steps`` (one pass over the chunk times); every percentile
    with its ``confidence`` interval. Windows hold p99 and ``window_percentiles`` (by default every percentile a
    budget rule may be judged at)."""
    prep = prepare(ensure_derived(df), steps=steps, all_arms=True)
    layout = window_layout(prep, window_s, min_fraction)
    gaps = gap_stats(prep, layout)
    tables = summaries(prep, slo, gaps, confidence)
    series = points(prep, layout, gaps, confidence, window_percentiles)
    return {arm: ArmTables(tables[arm], series[arm]) for arm in prep.arms}
