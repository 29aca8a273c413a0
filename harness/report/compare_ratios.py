"""B/A ratio intervals for ``harness compare``, from the two runs' request records.

Per arm (matched by name) and step (matched by index), with :mod:`harness.stats.intervals`:

* **p99 TTFT**: :func:`~harness.stats.intervals.quantile_ratio` of the successful requests, paired by plan key
  where the runs planned the same requests (same scenario and seed: ``request_id`` is ``<arm>/<step tag>/<plan
  key>``, see ``harness.load.driver``), else as two independent samples;
* **p99 ITL**: the same over inter-token gaps, unpaired; gaps are thinned evenly to at most
  :data:`MAX_GAPS` per side to bound the bootstrap's memory, and are resampled as if independent (gaps within a
  request are correlated, so this interval can be too narrow); unresolved whenever either summary's p99 ITL is;
* **output tokens/s**: :func:`~harness.stats.intervals.sum_ratio` of output tokens over each step's duration.

Each run's rows are those its summary judged (:func:`harness.rundir.attempts.counted_rows`: a step's counted
attempt, inside that attempt's journaled span). When either run lacks its request records, or they (or its
``steps.jsonl``) cannot be read (not Parquet, wrong column types), the comparison uses the summaries' figures alone
and says so, with the reason; a step without records on one side gets no interval (its summary ratio stands, marked
``?`` when a percentile is unresolved).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from harness.report.compare import Comparison, Intervals, compare_summaries
from harness.report.load import load_summary
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
    sel = (frame["arm"].astype(str) == arm) & (pd.to_numeric(frame["step"], errors="coerce") == step)
    if "drill" in frame.columns:
        sel &= frame["drill"].isna()
    sel &= frame["ok"].astype(bool)
    return frame.loc[sel.to_numpy(dtype=bool)].reset_index(drop=True)


def _gaps(rows: pd.DataFrame) -> F64:
    from harness.analysis.latency import chunk_gaps

    gaps = chunk_gaps(rows).ms.astype(np.float64)
    if len(gaps) > MAX_GAPS:
        gaps = gaps[np.linspace(0, len(gaps) - 1, MAX_GAPS).astype(np.int64)]
    return gaps


def step_intervals(rows_a: pd.DataFrame, rows_b: pd.DataFrame, duration_a: float, duration_b: float,
                   confidence: float) -> dict[str, RatioCI]:
    """B/A intervals for one step's p99 TTFT, p99 ITL and output tokens/s."""
    from harness.stats.intervals import quantile_ratio, sum_ratio

    ttft_a = rows_a["ttft_ms"].to_numpy(dtype=np.float64)
    ttft_b = rows_b["ttft_ms"].to_numpy(dtype=np.float64)
    out = {"ttft_p99_ms": quantile_ratio(ttft_b, ttft_a, 0.99, confidence,
                                         keys_a=plan_keys(rows_b), keys_b=plan_keys(rows_a))}
    itl = quantile_ratio(_gaps(rows_b), _gaps(rows_a), 0.99, confidence)
    out["itl_p99_ms"] = itl.model_copy(update={"method": f"{itl.method}, gaps unpaired (thinned to ≤{MAX_GAPS})"})
    out["output_tokens_per_s"] = sum_ratio(rows_b["output_tokens_eff"].to_numpy(dtype=np.float64),
                                           rows_a["output_tokens_eff"].to_numpy(dtype=np.float64),
                                           duration_b, duration_a, confidence)
    return out


def ratio_intervals(a: Summary, b: Summary, frame_a: pd.DataFrame, frame_b: pd.DataFrame) -> Intervals:
    """Every matched arm and step's B/A intervals."""
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
            if rows_a.empty or rows_b.empty:  # no records for this step: the summaries' figures stand alone
                continue
            found = step_intervals(rows_a, rows_b, step_a.duration_s, step_b.duration_s, b.statistics.confidence)
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
        intervals = ratio_intervals(a, b, load_frame(run_a), load_frame(run_b))
    except (ReportInputError, OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("ratio intervals not computed: %s", exc)
        return compare_summaries(a, b, ratio_source=f"summaries only (the request records could not be read: "
                                                    f"{exc}): ratios have no interval")
    conf = b.statistics.confidence
    source = (f"{conf:.0%} intervals from both runs' requests.parquet (percentile bootstrap; p99 TTFT paired by "
              f"request plan key where at least 80% of requests match)")
    return compare_summaries(a, b, intervals, ratio_source=source)
