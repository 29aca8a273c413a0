"""The steady state of a step: MSER-5's cut in send order, errors in the transient cut with it, throughput over the
window from completions inside it, the cut recorded per step, pairing only for the same planned requests."""

from __future__ import annotations

import numpy as np
import pytest
from analysis_helpers import BASE, MS, frame, record

from harness.analysis import step_table
from harness.analysis.latency import derive_latencies
from harness.analysis.steady import describe, pair_positions, steady_cut, throughput_bins, tokens_series
from harness.analysis.steptable import within_slo
from harness.config.rules import SloSpec
from harness.rundir.records import RequestRecord

N = 300
BURST = 40  # the first requests meet the load change


def _step(seed: int = 0) -> list[RequestRecord]:
    rng = np.random.default_rng(seed)
    out = []
    for k in range(N):
        ttft = (900.0 if k < BURST else 100.0) * rng.lognormal(0.0, 0.2)
        error = "timeout" if k in (3, 150) else None  # one error in the transient, one after it
        out.append(record("a", 0, 50.0 * k, ttft, [20.0, 20.0], error=error, rid=f"a/s0/r{k}"))
    return out[::-1]  # records in any order: the cut is in send order


SPAN = (BASE, BASE + 15_500 * MS)


def test_mser5_cuts_the_burst_and_every_request_sent_before_the_cut() -> None:
    df = derive_latencies(frame(_step()))
    cut = steady_cut(df, *SPAN)
    send = df["send_ns"].to_numpy(dtype=np.int64)
    assert BURST - 5 <= cut.removed <= BURST + 15  # MSER-5 may take a batch or two of the steady state with it
    assert cut.removed % 5 in (0, 1)  # 5 x batches of successful requests, plus the error sent among them
    assert (cut.kept == (send >= cut.start_ns)).all()  # everything sent before the first kept request is cut
    assert not cut.kept[df["request_id"] == "a/s0/r3"].any()  # the transient's error goes with it
    assert cut.kept[df["request_id"] == "a/s0/r150"].all()
    assert cut.seconds_removed == pytest.approx((cut.start_ns - BASE) / 1e9)
    assert cut.seconds == pytest.approx((SPAN[1] - cut.start_ns) / 1e9)


def test_throughput_is_the_completions_inside_the_window_over_its_duration() -> None:
    df = derive_latencies(frame(_step()))
    cut = steady_cut(df, *SPAN)
    end = df["end_ns"].to_numpy(dtype=np.int64)
    ok = df["ok"].to_numpy(dtype=bool)
    inside = ok & (end >= cut.start_ns) & (end <= SPAN[1])
    assert (cut.completed == inside).all()
    tokens = df["output_tokens_eff"].to_numpy(dtype=float)
    bins = tokens_series(df, cut)
    assert len(bins) == throughput_bins(int(inside.sum())) and bins.sum() == pytest.approx(tokens[inside].sum())
    state = describe(df, cut, within_slo(df, SloSpec(ttft_p99_ms=500.0)))
    assert state.output_tokens_per_s == pytest.approx(tokens[inside].sum() / cut.seconds)
    assert (state.requests, state.completed) == (N - cut.removed, int(inside.sum()))
    assert state.samples == state.requests - 1  # the kept error has no TTFT
    assert state.goodput == pytest.approx(1 - 1 / state.requests)  # after the burst only the error misses the SLO
    assert state.rule.startswith("MSER-5") and state.settled


def test_the_step_table_records_the_cut_per_step() -> None:
    spans = [{"arm": "a", "step": 0, "label": "c4", "concurrency": 4, "start_ns": SPAN[0], "end_ns": SPAN[1]}]
    step = step_table(frame(_step()), SloSpec(), steps=spans)[0]
    assert step.requests == N and step.steady_state is not None
    direct = steady_cut(derive_latencies(frame(_step())), *SPAN)
    assert step.steady_state.requests_removed == direct.removed
    assert step.steady_state.end_s == pytest.approx(15.5)
    assert step.ttft_ms.count == N - 2  # the step's own figures are the whole step (budgets judge those)


def test_without_a_span_the_step_starts_at_its_first_send() -> None:
    df = derive_latencies(frame(_step()))
    cut = steady_cut(df, duration_s=15.5)
    assert cut.step_start_ns == BASE and cut.end_ns == BASE + 15_500 * MS


def test_a_short_step_is_not_cut() -> None:
    df = derive_latencies(frame([record("a", 0, 50.0 * k, 900.0 if k < 5 else 100.0, [20.0], rid=f"r{k}")
                                 for k in range(30)]))
    cut = steady_cut(df)
    assert cut.removed == 0 and cut.start_ns == BASE and not cut.truncation.settled


def test_pairs_only_for_exactly_the_same_requests() -> None:
    all_a = np.array(["k1", "k2", "k3", "k4"])
    keys_a, keys_b = np.array(["k2", "k3", "k4"]), np.array(["k4", "k3"])  # steady-state, successful
    found = pair_positions(all_a, keys_a, all_a[::-1].copy(), keys_b)
    assert found is not None
    ia, ib = found
    assert keys_a[ia].tolist() == ["k3", "k4"] and keys_b[ib].tolist() == ["k3", "k4"]  # in a's order
    assert pair_positions(all_a, keys_a, np.array(["k1", "k2", "k3"]), keys_b) is None  # one request short
    assert pair_positions(all_a, keys_a, np.array(["k1", "k2", "k3", "k9"]), keys_b) is None
    assert pair_positions(np.array(["k1", "k1"]), keys_a, np.array(["k1", "k1"]), keys_b) is None
