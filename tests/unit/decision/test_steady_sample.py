"""The decision sample is the steady state: its n is the n compared and printed; closed-loop steps are never paired,
planned steps are paired only when both arms served every request; throughput's n is the window's completions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from harness.analysis.latency import derive_latencies
from harness.analysis.load import table_to_frame
from harness.config.rules import RegressionRule, SloSpec
from harness.decision.evidence import StepSample, improvement, paired_values, plan_keys, regression_step, step_sample
from harness.rundir.records import SCHEMA, RequestRecord

N = 600
MS = 1_000_000
BASE = 1_000_000_000_000
SPAN = (BASE, BASE + 31_000 * MS)


def _record(arm: str, k: int, ttft_ms: float) -> dict[str, object]:
    send = BASE + k * 50 * MS
    chunks = [send + round(ttft_ms * MS) + j * 20 * MS for j in range(4)]
    return RequestRecord(
        arm=arm, step=0, step_label="c8", concurrency=8, rate_rps=None, user=k % 8, request_id=f"{arm}/s0/r{k}",
        request_class="short", prefix_family=None, session_id=None, turn=None, api="chat", planned_send_ns=send,
        send_ns=send, send_wall_ns=send, first_byte_ns=chunks[0], first_token_ns=chunks[0], end_ns=chunks[-1] + MS,
        chunk_ns=chunks, output_tokens=4).to_row()


def _frame(arm: str, scale: float, n: int = N, seed: int = 0, skip: int | None = None) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cost = np.random.default_rng(99).lognormal(np.log(100.0), 0.5, n)  # the planned request's own cost
    rows = [_record(arm, k, (800.0 if k < 30 else cost[k] * scale) * rng.lognormal(0.0, 0.05))
            for k in range(n) if k != skip]
    return derive_latencies(table_to_frame(pa.Table.from_pylist(rows, schema=SCHEMA)))


def _sample(arm: str, scale: float, *, planned: bool, **kw: int) -> StepSample:
    return step_sample(_frame(arm, scale, **kw), 31.0, SloSpec(), start_ns=SPAN[0], end_ns=SPAN[1], planned=planned)


def test_the_sample_is_the_steady_state_and_carries_its_cut() -> None:
    s = _sample("a", 1.0, planned=False)
    assert s.cut is not None and s.cut.requests_removed >= 30 and s.n == s.cut.samples == N - s.cut.requests_removed
    assert s.whole is not None and len(s.whole["ttft"]) == N  # budgets still see the whole step
    assert s.budget_metric("ttft") is s.whole["ttft"] and len(s.metric("ttft")) == s.n
    assert s.duration_s == pytest.approx(31.0 - s.cut.seconds_removed)
    assert s.completions == s.cut.completed and s.tokens.sum() / s.duration_s == pytest.approx(
        s.cut.output_tokens_per_s)
    assert (np.diff(s.ttft[:5]) != 0).any() and s.all_keys is not None and len(s.all_keys) == N


def test_closed_loop_steps_are_not_paired_even_when_every_key_matches() -> None:
    a, b = _sample("a", 1.3, planned=False), _sample("b", 1.0, planned=False)
    assert paired_values(a, b, "ttft") is None
    rule = RegressionRule(metric="ttft", percentile=90, max_ratio=1.1)
    verdict = regression_step(rule, 0, "c8", a, b, alpha_each=0.025)
    ci = verdict.result.interval
    assert ci is not None and not ci.paired and (ci.n, ci.n_versus) == (a.n, b.n)
    assert f"n={a.n}/{b.n} (steady state)" in verdict.result.message


def test_planned_steps_pair_the_requests_both_arms_kept_when_all_were_served() -> None:
    a, b = _sample("a", 1.3, planned=True), _sample("b", 1.0, planned=True)
    pairs = paired_values(a, b, "ttft")
    assert pairs is not None
    common = len(set(a.keys) & set(b.keys))
    assert len(pairs[0]) == common and np.allclose(np.median(pairs[0] / pairs[1]), 1.3, rtol=0.05)
    rule = RegressionRule(metric="ttft", percentile=90, max_ratio=1.1)
    ci = regression_step(rule, 0, "r20", a, b, alpha_each=0.025).result.interval
    assert ci is not None and ci.paired and ci.n == ci.n_versus == common
    short = _sample("b", 1.0, planned=True, skip=400)  # one planned request never served: not all of them
    assert paired_values(a, short, "ttft") is None


def test_throughput_compares_the_windows_completions() -> None:
    a, b = _sample("a", 1.0, planned=False), _sample("b", 1.0, planned=False, n=400)
    ci = improvement("output_tokens_per_s", a, b, 0.95)
    assert (ci.n, ci.n_versus) == (a.completions, b.completions)
    assert ci.ratio == pytest.approx((a.tokens.sum() / a.duration_s) / (b.tokens.sum() / b.duration_s))
    p95 = improvement("ttft_p95", a, b, 0.95)
    assert (p95.n, p95.n_versus) == (a.n, b.n)


def test_plan_keys_are_pandas_split_of_the_ids() -> None:
    cases = [pd.Series(["arm/c8/u0.1", "arm/c8/u1.0/x", "a//", "plain", "a/b"]), pd.Series([], dtype=str),
             pd.Series(["a/b/c/d", None, float("nan"), 5], dtype=object), pd.Series(["a/b/c", None], dtype="string")]
    for ids in cases:
        want = np.asarray(ids.astype(str).str.split("/", n=2).str[-1].to_numpy(), dtype=str)
        got = plan_keys(ids)
        assert got.dtype == want.dtype and got.tolist() == want.tolist()
