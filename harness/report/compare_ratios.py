"""B/A ratio intervals for ``harness compare``, from the two runs' request records.

Per arm (matched by name) and step (matched by index), with :mod:`harness.stats.intervals`:

Every figure is on each step's **steady state**, cut as the summary cuts it (:mod:`harness.analysis.steady`:
MSER-5 on TTFT in send order, the window from the first request kept to the step's journaled end):

* **p99 TTFT**: :func:`~harness.stats.intervals.quantile_ratio` of the successful steady-state requests, two
  independent samples, block bootstrap; paired by plan key only where both steps were open-loop (every record has a
  ``rate_rps``: the same planned schedule) and served exactly the same requests (``request_id`` is ``<arm>/<step
  tag>/<plan key>``, see ``harness.load.driver``): in a closed loop the faster run gets further down the plan, and
  pairs would be the first requests of its step;
* **p99 ITL**: the same over inter-token gaps, unpaired; gaps are thinned evenly to at most
  :data:`MAX_GAPS` per side to bound the bootstrap's memory, and resampled in blocks in their arrival order (gaps
  within a request are correlated; the block length adapts to it); unresolved whenever either summary's p99 ITL is;
* **output tokens/s**: :func:`~harness.stats.intervals.sum_ratio` of the output tokens per time bin of each
  steady-state window (requests that completed inside it) over the window's duration.

Each run's rows are those its summary judged (:func:`harness.rundir.attempts.counted_rows`: a step's counted
attempt, inside that attempt's journaled span). When either run lacks its request records, or they (or its
``steps.jsonl``) cannot be read (not Parquet, wrong column types), the comparison uses the summaries' figures alone
and says so, with the reason; a step without records on one side gets no interval (its summary ratio stands, marked
``?`` when a percentile is unresolved).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from harness.report.compare import Comparison, Intervals, compare_summaries
from harness.report.load import load_summary
from harness.rundir.entries import StepEntry
from harness.rundir.errors import ReportInputError
from harness.rundir.journal import read_step_entries
from harness.rundir.layout import RunDir
from harness.rundir.read import check_requests
from harness.schema.intervals import RatioCI
from harness.schema.summary import ArmSummary, Summary

log = logging.getLogger(__name__)
MAX_GAPS = 5000
F64 = npt.NDArray[np.float64]


def has_requests(run_dir: Path) -> bool:
    """Whether the run kept its request records (``requests.parquet`` or the per-arm parts)."""
    run = RunDir(run_dir)
    return run.requests.is_file() or bool(run.record_parts())


def load_frame(run_dir: Path) -> pd.DataFrame:
    """The run's requests that count, as its summary judged them (:func:`~harness.rundir.attempts.counted_rows`),
    with derived latencies (TTFT, output tokens)."""
    from harness.analysis import load_requests
    from harness.analysis.latency import ensure_derived
    from harness.rundir.attempts import counted_rows

    frame = counted_rows(load_requests(run_dir), read_step_entries(RunDir(run_dir)))
    return ensure_derived(frame)


def plan_keys(frame: pd.DataFrame) -> npt.NDArray[np.str_]:
    """The plan key of each request: ``request_id`` without its ``<arm>/<step tag>/`` prefix."""
    arms = frame["arm"].astype(str).tolist()
    ids = frame["request_id"].astype(str).tolist()
    keys = [rid.removeprefix(f"{arm}/").partition("/")[2] for arm, rid in zip(arms, ids, strict=True)]
    return np.asarray(keys, dtype=str)


def _step_rows(frame: pd.DataFrame, arm: str, step: int) -> pd.DataFrame:
    """Every request row of one arm's step (errors too: the steady-state cut counts them), drills left out."""
    sel = (frame["arm"].astype(str) == arm) & (pd.to_numeric(frame["step"], errors="coerce") == step)
    if "drill" in frame.columns:
        sel &= frame["drill"].isna()
    return frame.loc[sel.to_numpy(dtype=bool)].reset_index(drop=True)


def _gaps(rows: pd.DataFrame) -> F64:
    from harness.analysis.latency import chunk_gaps

    gaps = chunk_gaps(rows).ms.astype(np.float64)
    if len(gaps) > MAX_GAPS:
        gaps = gaps[np.linspace(0, len(gaps) - 1, MAX_GAPS).astype(np.int64)]
    return gaps


@dataclass(frozen=True)
class SteadyRows:
    """One step's steady state for a comparison: its successful steady-state rows in send order, every request's
    plan key, the output tokens per time bin of the window and the window's duration."""

    rows: pd.DataFrame
    all_keys: npt.NDArray[np.str_]
    tokens: F64
    completed: int
    seconds: float
    open_loop: bool


def steady_rows(rows: pd.DataFrame, span: StepEntry | None, duration_s: float) -> SteadyRows:
    """The steady state of one step's rows (:mod:`harness.analysis.steady`, as the summary cut it)."""
    from harness.analysis.steady import steady_cut, tokens_series

    cut = steady_cut(rows, span.start_ns if span else None, span.end_ns if span else None, duration_s)
    ordered = rows.iloc[cut.order].reset_index(drop=True)
    keep = cut.kept[cut.order] & ordered["ok"].to_numpy(dtype=bool)
    rate = pd.to_numeric(rows["rate_rps"], errors="coerce") if "rate_rps" in rows.columns else None
    return SteadyRows(rows=ordered[keep].reset_index(drop=True), all_keys=plan_keys(ordered),
                      tokens=tokens_series(rows, cut), completed=int(cut.completed.sum()), seconds=cut.seconds,
                      open_loop=rate is not None and len(rate) > 0 and bool(rate.notna().all()))


def step_intervals(a: SteadyRows, b: SteadyRows, confidence: float) -> dict[str, RatioCI]:
    """B/A intervals for one step's p99 TTFT, p99 ITL and output tokens/s, on the two steady states."""
    from harness.analysis.steady import pair_positions
    from harness.stats.intervals import quantile_ratio, sum_ratio

    ttft_a = a.rows["ttft_ms"].to_numpy(dtype=np.float64)
    ttft_b = b.rows["ttft_ms"].to_numpy(dtype=np.float64)
    pairs = pair_positions(b.all_keys, plan_keys(b.rows), a.all_keys, plan_keys(a.rows)) \
        if a.open_loop and b.open_loop else None
    if pairs is not None:
        ttft = quantile_ratio(ttft_b[pairs[0]], ttft_a[pairs[1]], 0.99, confidence, paired=True)
    else:
        ttft = quantile_ratio(ttft_b, ttft_a, 0.99, confidence)
    out = {"ttft_p99_ms": ttft}
    itl = quantile_ratio(_gaps(b.rows), _gaps(a.rows), 0.99, confidence)
    out["itl_p99_ms"] = itl.model_copy(update={"method": f"{itl.method}, gaps unpaired (thinned to ≤{MAX_GAPS})"})
    out["output_tokens_per_s"] = sum_ratio(b.tokens, a.tokens, b.seconds, a.seconds, confidence, n=b.completed,
                                           n_versus=a.completed, unit="completed requests")
    return out


Spans = Mapping[tuple[str, int], StepEntry]


def step_spans(run_dir: Path) -> Spans:
    """The journaled span of every measured step's counted attempt, by (arm, step)."""
    from harness.rundir.attempts import counted_entries

    entries = counted_entries(e for e in read_step_entries(RunDir(run_dir)) if not e.drill and e.step >= 0)
    return {(e.arm, e.step): e for e in entries}


def ratio_intervals(a: Summary, b: Summary, frame_a: pd.DataFrame, frame_b: pd.DataFrame,
                    spans_a: Spans | None = None, spans_b: Spans | None = None) -> Intervals:
    """Every matched arm and step's B/A intervals, on the steps' steady states (``spans_*``: the journaled step
    spans, where the steady-state windows end; without one a step starts at its first send and lasts its duration)."""
    spans_a, spans_b = spans_a or {}, spans_b or {}
    arms_a: dict[str, ArmSummary] = {arm.name: arm for arm in a.arms}
    result: Intervals = {}
    for arm_b in b.arms:
        arm_a = arms_a.get(arm_b.name)
        if arm_a is None:
            continue
        steps_a = {s.index: s for s in arm_a.steps}
        for step_b in arm_b.steps:
            step_a = steps_a.get(step_b.index)
            if step_a is None:
                continue
            rows_a = _step_rows(frame_a, arm_a.name, step_a.index)
            rows_b = _step_rows(frame_b, arm_b.name, step_b.index)
            if not (rows_a["ok"].astype(bool).any() and rows_b["ok"].astype(bool).any()):
                continue  # no records for this step: the summaries' figures stand alone
            found = step_intervals(steady_rows(rows_a, spans_a.get((arm_a.name, step_a.index)), step_a.duration_s),
                                   steady_rows(rows_b, spans_b.get((arm_b.name, step_b.index)), step_b.duration_s),
                                   b.statistics.confidence)
            if not (step_a.itl_ms.resolved("p99") and step_b.itl_ms.resolved("p99")):
                # Gaps within a request are correlated: the summaries resolve ITL percentiles by requests, and a
                # p99 they cannot resolve is not made comparable by resampling its gaps.
                found["itl_p99_ms"] = found["itl_p99_ms"].model_copy(update={
                    "lo": None, "hi": None, "resolved": False,
                    "note": "p99 ITL is unresolved in a summary (too few requests)"})
            for measure, ci in found.items():
                result[(arm_b.name, step_b.index, measure)] = ci
    return result


def compare_runs(run_a: Path, run_b: Path) -> Comparison:
    """Compare two run directories, with ratio intervals from their requests when both kept them."""
    a, b = load_summary(run_a), load_summary(run_b)
    lacking = [str(RunDir(p).requests) for p in (run_a, run_b) if not has_requests(p)]
    if lacking:
        return compare_summaries(a, b, ratio_source=f"summaries only ({', '.join(lacking)} missing): ratios have "
                                                    "no interval")
    try:
        for run_dir in (run_a, run_b):
            check_requests(RunDir(run_dir))
        intervals = ratio_intervals(a, b, load_frame(run_a), load_frame(run_b), step_spans(run_a), step_spans(run_b))
    except (ReportInputError, OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ratio intervals not computed: %s", exc)
        return compare_summaries(a, b, ratio_source=f"summaries only (the request records could not be read: "
                                                    f"{exc}): ratios have no interval")
    from harness.stats.intervals import RATIO_METHOD_NOTE  # scipy

    conf = b.statistics.confidence
    source = (f"{conf:.0%} intervals from both runs' requests.parquet, on each step's steady state (transient cut "
              f"by MSER-5; {RATIO_METHOD_NOTE})")
    return compare_summaries(a, b, intervals, ratio_source=source)
