"""Windowed percentile series inside each step, for the rollback rules and the timeline chart.

Each step is cut into consecutive windows of ``window_s`` from its start; a last piece shorter than
``min_fraction`` of a window is merged into the window before it. ``start_s``/``end_s`` are seconds since the arm's
first measured step started. Latencies are placed where a monitor would see them: TTFT at the first token, each
inter-token gap at its chunk's arrival, E2E at the request's end; ``requests`` counts requests that ended in the
window (errors included; an error without an end time counts at its send time). Successful requests only feed the
percentiles. Every window has its p99s; ``percentiles`` names the others to compute (a budget rule may be judged at
p50 or p95), which land in :attr:`~harness.schema.windows.WindowPoint.percentiles`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from harness.analysis.gapstats import GapStats, gap_stats
from harness.analysis.latency import float_column, ns_column
from harness.analysis.prepare import Prepared, StepsArg, WindowLayout, prepare, window_codes, window_layout
from harness.schema.windows import WindowPoint, WindowQuantile, window_key
from harness.stats.grouped import GroupStats, grouped_stats
from harness.stats.intervals import DEFAULT_CONFIDENCE


def _others(w: int, qs: tuple[float, ...], ttft: GroupStats, e2e: GroupStats, itl: dict[float, npt.NDArray[np.float64]],
            gaps: GapStats, requests: int, confidence: float) -> dict[str, WindowQuantile]:
    """Window ``w`` at the percentiles besides p99 (``qs[1:]``), keyed as :func:`window_key`."""
    out: dict[str, WindowQuantile] = {}
    for q in qs[1:]:
        gap = float(itl[q][w])
        out[window_key("ttft", q)] = WindowQuantile(value_ms=ttft.value(w, q), ci=ttft.ci(w, q))
        out[window_key("itl", q)] = WindowQuantile(value_ms=None if np.isnan(gap) else gap,
                                                   ci=gaps.window_interval(w, q, requests, confidence))
        out[window_key("e2e", q)] = WindowQuantile(value_ms=e2e.value(w, q), ci=e2e.ci(w, q))
    return out


def points(prep: Prepared, layout: WindowLayout, gaps: GapStats, confidence: float = DEFAULT_CONFIDENCE,
           percentiles: Sequence[float] = ()) -> dict[str, list[WindowPoint]]:
    """Window series of every arm of ``prep`` (``gaps`` computed under the same ``layout``): p99 and ``percentiles``
    (0..100; 99 is always there)."""
    out: dict[str, list[WindowPoint]] = {arm: [] for arm in prep.arms}
    if not prep.groups:
        return out
    qs = (99.0, *sorted({float(q) for q in percentiles} - {99.0}))
    df, ok, group, total = prep.df, prep.ok, prep.row_group, layout.total
    first_tok, first_ok = ns_column(df, "first_token_ns")
    end_ns, end_ok = ns_column(df, "end_ns")
    send_ns, send_ok = ns_column(df, "send_ns")
    done = np.where(end_ok, end_ns, send_ns)
    req_codes = window_codes(done, end_ok | send_ok, group, prep, layout)
    requests = np.bincount(req_codes[req_codes >= 0], minlength=total)
    ttft = np.where(ok, float_column(df, "ttft_ms"), np.nan)
    ttft_s = grouped_stats(ttft, window_codes(first_tok, first_ok, group, prep, layout), total, qs, confidence)
    e2e = np.where(ok, float_column(df, "e2e_ms"), np.nan)
    e2e_s = grouped_stats(e2e, window_codes(end_ns, end_ok, group, prep, layout), total, qs, confidence)
    itl_q = {q: gaps.window_quantile(q) for q in qs}
    itl_p99 = itl_q[99.0]
    for arm in prep.arms:
        mine = prep.arm_groups(arm)
        origin = int(prep.start[mine].min())
        for g in mine:
            start, end = int(prep.start[g]), int(prep.end[g])
            count = int(layout.count[g])
            for k in range(count):
                w = int(layout.base[g]) + k
                w_start = start + k * layout.window_ns
                w_end = end if k == count - 1 else w_start + layout.window_ns
                itl = float(itl_p99[w])
                out[arm].append(WindowPoint(
                    ttft_p99_ci=ttft_s.ci(w, 99.0), e2e_p99_ci=e2e_s.ci(w, 99.0),
                    itl_p99_ci=gaps.window_interval(w, 99.0, int(requests[w]), confidence),
                    step=prep.groups[g][1], start_s=(w_start - origin) / 1e9,
                    end_s=(max(w_end, w_start) - origin) / 1e9, requests=int(requests[w]),
                    ttft_p99_ms=ttft_s.value(w, 99.0), itl_p99_ms=None if np.isnan(itl) else itl,
                    e2e_p99_ms=e2e_s.value(w, 99.0),
                    percentiles=_others(w, qs, ttft_s, e2e_s, itl_q, gaps, int(requests[w]), confidence)))
    return out


def windows(df: pd.DataFrame, window_s: float, *, steps: StepsArg = None, arm: str | None = None,
            min_fraction: float = 0.5, percentiles: Sequence[float] = ()) -> list[WindowPoint]:
    """Windowed p99 TTFT / ITL / E2E (and ``percentiles``) with request counts for one arm's measured steps (see
    module docs)."""
    prep = prepare(df, steps=steps, arm=arm)
    layout = window_layout(prep, window_s, min_fraction)
    return next(iter(points(prep, layout, gap_stats(prep, layout), percentiles=percentiles).values()), [])
