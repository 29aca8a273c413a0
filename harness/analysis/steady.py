"""The steady state of one step: which requests the comparisons use, and the window throughput is measured over.

When a step starts the load changes (more users arrive together on a server warmed by the step before, or a new
arrival rate begins), and the first seconds are a transient whose share of each arm's sample depends on the arm's
speed. The rule, the same for every arm and step:

* **the cut**: MSER-5 (:mod:`harness.stats.warmup`, White 1997) on the step's TTFT series of successful requests in
  send order (ties by request id) finds how many of the first requests are transient; the steady state starts at
  the send time of the first request kept, ``start_ns``, and lasts to the step's end. Every request sent before
  it (errors too) is left out: ``removed``. A series too short for the rule (under 50 requests) keeps everything;
  a minimum in the series' second half is reported as not settled (the cut is then the first half's best);
* **the latency sample** (TTFT, E2E, ITL percentiles; goodput's share): the requests sent at or after
  ``start_ns``, in send order;
* **throughput**: the output tokens of the successful requests that *completed* inside the window
  ``[start_ns, end_ns]`` (whenever they were sent), over the window's duration, as a series of output tokens per
  equal time bin (:func:`throughput_bins` bins, about 5 completions each, 20 to 200) for the block bootstrap
  (:func:`harness.stats.intervals.sum_ratio`): a rate measured over the window, whose count of completions varies
  as the server's speed does (resampling requests with their count fixed would miss that).

Budgets (the SLO) judge every request of the step, transient included (:mod:`harness.decision.rules.budget`): a
user who met the burst met it. Only the comparisons between arms use the steady state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from harness.analysis.latency import float_column, ns_column
from harness.schema.steady import SteadyState
from harness.stats.intervals import binned
from harness.stats.warmup import RULE, Truncation, mser5

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
Bool = npt.NDArray[np.bool_]
RULE_TEXT = f"{RULE} on TTFT in send order"
MIN_BINS = 20
MAX_BINS = 200
COMPLETIONS_PER_BIN = 5


def throughput_bins(completions: int) -> int:
    """How many equal time bins a window with ``completions`` completions is cut into for its rate's bootstrap."""
    return int(min(MAX_BINS, max(MIN_BINS, completions // COMPLETIONS_PER_BIN)))


@dataclass(frozen=True)
class SteadyCut:
    """One step's steady state over its rows (``order``: the rows in send order; masks are over ``df``'s rows)."""

    order: I64
    kept: Bool  # sent at or after start_ns (in df's row order)
    completed: Bool  # succeeded and ended inside [start_ns, end_ns]
    start_ns: int
    end_ns: int
    step_start_ns: int
    removed: int
    truncation: Truncation

    @property
    def seconds(self) -> float:
        """The window's duration."""
        return max(self.end_ns - self.start_ns, 0) / 1e9

    @property
    def seconds_removed(self) -> float:
        return max(self.start_ns - self.step_start_ns, 0) / 1e9


def send_order(df: pd.DataFrame) -> I64:
    """The rows' positions in send order (ties by request id, so the order does not depend on how records were read)."""
    send, _ = ns_column(df, "send_ns")
    ids = df["request_id"].astype(str).to_numpy() if "request_id" in df.columns else np.zeros(len(df), dtype=str)
    return np.asarray(np.lexsort((ids, send)), dtype=np.int64)


def steady_cut(df: pd.DataFrame, start_ns: int | None = None, end_ns: int | None = None,
               duration_s: float | None = None) -> SteadyCut:
    """The steady state of one step's derived records (:func:`harness.analysis.derive_latencies`).

    ``start_ns``/``end_ns``: the step's journaled span; without them the step starts at its first send and lasts
    ``duration_s`` (else to its last event)."""
    order = send_order(df)
    send, send_ok = ns_column(df, "send_ns")
    end, end_ok = ns_column(df, "end_ns")
    ok = df["ok"].to_numpy(dtype=bool) if "ok" in df.columns else np.zeros(len(df), dtype=bool)
    first_send = int(send[send_ok].min()) if send_ok.any() else 0
    step_start = first_send if start_ns is None else int(start_ns)
    if end_ns is not None:
        step_end = int(end_ns)
    elif duration_s is not None:
        step_end = step_start + round(duration_s * 1e9)
    else:
        step_end = int(max(end[end_ok].max(initial=step_start), send[send_ok].max(initial=step_start)))
    ttft = float_column(df, "ttft_ms")
    series_rows = order[ok[order] & ~np.isnan(ttft[order])]  # successful requests with a TTFT, in send order
    truncation = mser5(ttft[series_rows])
    if truncation.cut > 0:
        first_kept = int(series_rows[truncation.cut])
        position = np.empty(len(df), dtype=np.int64)
        position[order] = np.arange(len(df))
        kept = position >= position[first_kept]
        window_start = int(send[first_kept])
    else:
        kept = np.ones(len(df), dtype=bool)
        window_start = step_start
    completed = ok & end_ok & (end >= window_start) & (end <= step_end)
    return SteadyCut(order=order, kept=kept, completed=completed, start_ns=window_start,
                     end_ns=max(step_end, window_start), step_start_ns=step_start,
                     removed=int(np.count_nonzero(~kept)), truncation=truncation)


def tokens_series(df: pd.DataFrame, cut: SteadyCut) -> F64:
    """Output tokens per time bin of the steady-state window (successful requests completing inside it)."""
    end, _ = ns_column(df, "end_ns")
    tokens = np.nan_to_num(float_column(df, "output_tokens_eff"))
    done = cut.completed
    return binned(end[done], tokens[done], cut.start_ns, cut.end_ns, throughput_bins(int(done.sum())))


def describe(df: pd.DataFrame, cut: SteadyCut, good: Bool) -> SteadyState:
    """The cut as ``summary.json`` records it (``good``: each row within the SLO, see ``within_slo``)."""
    ok = df["ok"].to_numpy(dtype=bool) if "ok" in df.columns else np.zeros(len(df), dtype=bool)
    ttft = float_column(df, "ttft_ms")
    tokens = np.nan_to_num(float_column(df, "output_tokens_eff"))
    seconds = cut.seconds
    kept = int(cut.kept.sum())
    return SteadyState(
        rule=RULE_TEXT, requests_removed=cut.removed, seconds_removed=round(cut.seconds_removed, 6),
        start_s=round(cut.seconds_removed, 6), end_s=round(max(cut.end_ns - cut.step_start_ns, 0) / 1e9, 6),
        requests=kept, samples=int(np.count_nonzero(cut.kept & ok & ~np.isnan(ttft))),
        completed=int(cut.completed.sum()),
        output_tokens_per_s=float(tokens[cut.completed].sum() / seconds) if seconds > 0 else None,
        goodput=float(good[cut.kept].mean()) if kept else None, settled=cut.truncation.settled,
        note=cut.truncation.note)


def pair_positions(all_a: npt.NDArray[np.str_], keys_a: npt.NDArray[np.str_], all_b: npt.NDArray[np.str_],
                   keys_b: npt.NDArray[np.str_]) -> tuple[I64, I64] | None:
    """Positions in ``keys_a`` / ``keys_b`` of the requests in both steady-state samples, in ``a``'s order, when
    the two steps served exactly the same planned requests (``all_*``: every request of each step, each once);
    None otherwise. Only for steps on a planned schedule (the caller's to know): in a closed loop the faster arm
    gets further down the plan, and pairs would be the first requests of its step."""
    if len(all_a) == 0 or len(all_a) != len(all_b) or len(np.unique(all_a)) != len(all_a):
        return None
    if not np.array_equal(np.sort(all_a), np.sort(all_b)):
        return None
    _common, ia, ib = np.intersect1d(keys_a, keys_b, assume_unique=False, return_indices=True)
    if len(ia) == 0:
        return None
    by_a = np.argsort(ia, kind="stable")
    return np.asarray(ia[by_a], dtype=np.int64), np.asarray(ib[by_a], dtype=np.int64)
