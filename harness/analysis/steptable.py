"""Per-step client-side tables: request counts, errors, TTFT / ITL / E2E percentiles, throughput, goodput, hit classes.

Conventions (documented in docs/metrics.md):
* latency percentiles use successful requests only (errors are counted in ``errors`` / ``error_rate``);
* step ITL percentiles are over every inter-chunk gap of the step's successful requests;
* ``output_tokens_per_s`` = output tokens of successful requests / step duration (``steps.jsonl`` span, else the
  records' own span); ``request_rate`` = requests sent / duration;
* ``goodput`` = share of all requests that succeeded and met every SLO set: TTFT <= ``ttft_p99_ms``, mean ITL of the
  request <= ``itl_p99_ms``, E2E <= ``e2e_p99_ms`` (with no SLO set, the success share);
* hit classes by ``cached_tokens / prompt_tokens``: >= 0.9 ``mostly-cached``, > 0 ``partial``, 0 ``recomputed``;
* client health: send lag p50/p99 over every request; the first-token client delay (arrival to parse,
  ``first_token_client_delay_ms``) p50/p95/p99 over every request that has both times (None for older records);
* ``steady_state``: the step's transient cut and the steady-state window every comparison between arms uses
  (:mod:`harness.analysis.steady`); the figures above are over the whole step (what users saw, and what budgets
  judge).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pandas as pd

from harness.analysis.gapstats import GapStats, gap_stats
from harness.analysis.latency import float_column
from harness.analysis.prepare import Prepared, StepsArg, prepare, window_layout
from harness.analysis.steady import describe, steady_cut
from harness.config.rules import SloSpec
from harness.schema.intervals import Percentiles
from harness.schema.steady import SteadyState
from harness.schema.summary import ClientHealth, HitClassLatency, HitTokens, StepSummary
from harness.stats.grouped import GroupStats, grouped_stats
from harness.stats.intervals import DEFAULT_CONFIDENCE

HIT_CLASSES = ("mostly-cached", "partial", "recomputed")
MOSTLY_CACHED = 0.9
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


def hit_class_codes(ratio: F64) -> npt.NDArray[np.int64]:
    """0 mostly-cached, 1 partial, 2 recomputed, -1 unknown (no cached/prompt tokens reported)."""
    codes = np.full(len(ratio), -1, dtype=np.int64)
    codes[ratio >= MOSTLY_CACHED] = 0
    codes[(ratio > 0) & (ratio < MOSTLY_CACHED)] = 1
    codes[ratio == 0] = 2
    return codes


def within_slo(df: pd.DataFrame, slo: SloSpec) -> npt.NDArray[np.bool_]:
    """Per request: succeeded and met every SLO that is set (per-request mean ITL against the ITL budget)."""
    good = df["ok"].to_numpy(dtype=bool).copy()
    for column, budget in (("ttft_ms", slo.ttft_p99_ms), ("e2e_ms", slo.e2e_p99_ms)):
        if budget is not None:
            good &= float_column(df, column) <= budget
    if slo.itl_p99_ms is not None:
        itl = float_column(df, "itl_ms_mean")
        good &= np.isnan(itl) | (itl <= slo.itl_p99_ms)  # fewer than two chunks: no gap to judge
    return good


def _errors_by_kind(prep: Prepared, code: I64, n: int) -> list[dict[str, int]]:
    out: list[dict[str, int]] = [{} for _ in range(n)]
    if "error_kind" not in prep.df.columns:
        return out
    bad = ~prep.ok & (code >= 0)
    if not bad.any():
        return out
    kinds = prep.df["error_kind"].to_numpy(dtype=object)[bad]
    for (group, kind), count in Counter(zip(code[bad].tolist(), kinds.tolist(), strict=True)).items():
        out[int(group)][str(kind)] = count
    return out


def _first_per_group(prep: Prepared, column: str, n: int) -> list[object]:
    values: list[object] = [None] * n
    if column not in prep.df.columns:
        return values
    measured = np.flatnonzero(prep.row_group >= 0)
    groups, first = np.unique(prep.row_group[measured], return_index=True)
    col = prep.df[column]
    for group, pos in zip(groups.tolist(), first.tolist(), strict=True):
        value = col.iloc[int(measured[pos])]
        values[int(group)] = None if pd.isna(value) else value
    return values


def _hit_classes(prep: Prepared, ttft: F64, n: int) -> list[list[HitClassLatency]]:
    classes = hit_class_codes(float_column(prep.df, "hit_ratio"))
    combined = np.where((classes >= 0) & (prep.row_group >= 0), prep.row_group * len(HIT_CLASSES) + classes, -1)
    stats = grouped_stats(ttft, combined, n * len(HIT_CLASSES))
    out: list[list[HitClassLatency]] = []
    for group in range(n):
        rows = []
        for k, name in enumerate(HIT_CLASSES):
            cell = group * len(HIT_CLASSES) + k
            if stats.count[cell]:
                rows.append(HitClassLatency(hit_class=name, requests=int(stats.count[cell]),
                                            ttft_ms=stats.percentiles(cell)))
        out.append(rows)
    return out


def _opt_int(value: object) -> int | None:
    return int(value) if isinstance(value, int | float | np.integer | np.floating) else None


def _opt_float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float | np.integer | np.floating) else None


def _plain_percentiles(stats: GroupStats, group: int) -> Percentiles | None:
    """p50/p95/p99, mean and count of one group without intervals (a client-health figure); None when empty."""
    count = int(stats.count[group])
    if count == 0:
        return None
    p50, p95, p99 = (stats.value(group, q) for q in (50.0, 95.0, 99.0))
    return Percentiles(p50=p50, p95=p95, p99=p99, mean=float(stats.mean[group]), count=count)


def steady_states(prep: Prepared, good: npt.NDArray[np.bool_]) -> list[SteadyState | None]:
    """Each group's steady state (:func:`harness.analysis.steady.steady_cut` over its span); None without rows."""
    out: list[SteadyState | None] = []
    order = np.argsort(prep.row_group, kind="stable")
    bounds = np.searchsorted(prep.row_group[order], np.arange(len(prep.groups) + 1))
    for g in range(len(prep.groups)):
        rows = order[bounds[g]:bounds[g + 1]]
        if len(rows) == 0:
            out.append(None)
            continue
        part = prep.df.iloc[rows]
        cut = steady_cut(part, int(prep.start[g]), int(prep.end[g]))
        out.append(describe(part, cut, good[rows]))
    return out


def summaries(prep: Prepared, slo: SloSpec, gaps: GapStats, confidence: float = DEFAULT_CONFIDENCE
              ) -> dict[str, list[StepSummary]]:
    """Step summaries of every arm of ``prep`` (``gaps`` under any window layout of ``prep``)."""
    n = len(prep.groups)
    out: dict[str, list[StepSummary]] = {arm: [] for arm in prep.arms}
    if n == 0:
        return out
    df, ok = prep.df, prep.ok
    code = prep.row_group
    use = code >= 0
    idx = np.where(use, code, 0)

    def count(weights: F64) -> F64:
        return np.asarray(np.bincount(idx, weights=np.where(use, weights, 0.0), minlength=n), dtype=np.float64)

    requests = count(np.ones(len(df))).astype(np.int64)
    with_gaps = count((ok & (float_column(df, "n_chunks") >= 2)).astype(np.float64)).astype(np.int64)
    errors = count((~ok).astype(np.float64)).astype(np.int64)
    ttft = np.where(ok, float_column(df, "ttft_ms"), np.nan)
    ttft_s = grouped_stats(ttft, code, n, confidence=confidence)
    e2e_s = grouped_stats(np.where(ok, float_column(df, "e2e_ms"), np.nan), code, n, confidence=confidence)
    lag_s = grouped_stats(float_column(df, "send_lag_ms"), code, n, qs=(50.0, 99.0), confidence=None)
    delay_s = grouped_stats(float_column(df, "first_token_client_delay_ms"), code, n, confidence=None)
    out_tokens = count(np.where(ok, np.nan_to_num(float_column(df, "output_tokens_eff")), 0.0))
    good_rows = within_slo(df, slo)
    good = count(good_rows.astype(np.float64))
    steady = steady_states(prep, good_rows)
    cached = float_column(df, "cached_tokens")
    cached_sum = count(np.nan_to_num(cached))
    cached_seen = count((~np.isnan(cached)).astype(np.float64))
    kinds = _errors_by_kind(prep, code, n)
    classes = _hit_classes(prep, ttft, n)
    labels, conc, rates = (_first_per_group(prep, c, n) for c in ("step_label", "concurrency", "rate_rps"))
    for g, (arm, step) in enumerate(prep.groups):
        span = prep.spans[g]
        duration = max(int(prep.end[g]) - int(prep.start[g]), 0) / 1e9
        reqs = int(requests[g])
        concurrency = span.concurrency if span and span.concurrency is not None else conc[g]
        rate = span.rate_rps if span and span.rate_rps is not None else rates[g]
        out[arm].append(StepSummary(
            index=step, label=(span.label if span and span.label else str(labels[g] or f"step-{step}")),
            concurrency=_opt_int(concurrency), rate_rps=_opt_float(rate),
            duration_s=duration, requests=reqs, errors=int(errors[g]),
            error_rate=float(errors[g] / reqs) if reqs else 0.0, errors_by_kind=kinds[g],
            ttft_ms=ttft_s.percentiles(g),
            itl_ms=gaps.group_percentiles(g, n_requests=int(with_gaps[g]), confidence=confidence),
            e2e_ms=e2e_s.percentiles(g),
            output_tokens_per_s=float(out_tokens[g] / duration) if duration > 0 else None,
            request_rate=reqs / duration if duration > 0 else None,
            goodput=float(good[g] / reqs) if reqs else None,
            hit_tokens=HitTokens(source="none"),
            client_cached_tokens=int(cached_sum[g]) if cached_seen[g] else None,
            ttft_by_hit_class=classes[g],
            client=ClientHealth(send_lag_ms_p50=lag_s.value(g, 50.0), send_lag_ms_p99=lag_s.value(g, 99.0)),
            first_token_delay_ms=_plain_percentiles(delay_s, g),
            steady_state=steady[g],
        ))
    return out


def step_table(df: pd.DataFrame, slo: SloSpec, *, steps: StepsArg = None, arm: str | None = None) -> list[StepSummary]:
    """Client-side summaries of one arm's measured steps (warm-up and drills excluded).

    ``df``: request records (derived columns added if absent) of one arm, or pass ``arm``. ``steps``: ``steps.jsonl``
    spans (models or dicts) for exact durations; without them the records' own span is used.
    """
    prep = prepare(df, steps=steps, arm=arm)
    tables = summaries(prep, slo, gap_stats(prep, window_layout(prep, None)))
    return next(iter(tables.values()), [])


def table_rows(steps: Sequence[StepSummary]) -> list[dict[str, object]]:
    """Flat rows (one per step) for printing or CSV."""
    return [{"step": s.index, "label": s.label, "requests": s.requests, "errors": s.errors,
             "ttft_p50": s.ttft_ms.p50, "ttft_p99": s.ttft_ms.p99, "itl_p99": s.itl_ms.p99, "e2e_p99": s.e2e_ms.p99,
             "tok_s": s.output_tokens_per_s, "goodput": s.goodput} for s in steps]
