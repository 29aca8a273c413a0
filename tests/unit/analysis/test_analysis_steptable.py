"""Per-step client tables: counts, errors, percentiles, throughput, goodput, hit classes; warm-up/drills excluded."""

from __future__ import annotations

import numpy as np
import pytest
from analysis_helpers import BASE, MS, frame, record

from harness.analysis import analyze_arms, step_table
from harness.config.rules import SloSpec
from harness.rundir.entries import StepEntry
from harness.rundir.records import RequestRecord


def _records() -> list[RequestRecord]:
    return [
        record("a", -1, 0, 9999.0, [1]),  # warm-up
        record("a", -2, 0, 8888.0, [1]),  # drill
        record("a", 0, 1000, 100.0, [10, 20], cached=950),
        record("a", 0, 2000, 200.0, [30], cached=500),
        record("a", 0, 3000, 300.0, [40, 40, 40], cached=0),
        record("a", 0, 4000, 400.0, [50]),
        record("a", 0, 5000, 5000.0, [], error="timeout"),
        record("a", 1, 12000, 50.0, [5], concurrency=8, cached=1000),
        record("a", 1, 13000, 70.0, [7], concurrency=8, error="http_5xx"),
    ]


SPANS = [
    {"arm": "a", "step": -1, "label": "warmup", "start_ns": BASE, "end_ns": BASE + 900 * MS, "warmup": True},
    {"arm": "a", "step": 0, "label": "c4", "concurrency": 4, "start_ns": BASE + 1000 * MS,
     "end_ns": BASE + 11000 * MS, "warmup": False, "requests": 5, "client": {"cpu_percent": 3}},
    {"arm": "a", "step": 1, "label": "c8", "concurrency": 8, "start_ns": BASE + 12000 * MS,
     "end_ns": BASE + 14000 * MS, "warmup": False},
    {"arm": "a", "step": -2, "label": "drill", "start_ns": BASE, "end_ns": BASE + 1, "drill": "cache-loss"},
]


def test_step_table_counts_percentiles_and_rates() -> None:
    steps = step_table(frame(_records()), SloSpec(ttft_p99_ms=250.0), steps=SPANS)
    assert [s.index for s in steps] == [0, 1]
    s0 = steps[0]
    assert (s0.label, s0.concurrency, s0.duration_s) == ("c4", 4, 10.0)
    assert (s0.requests, s0.errors, s0.errors_by_kind) == (5, 1, {"timeout": 1})
    assert s0.error_rate == pytest.approx(0.2)
    ttfts = [100.0, 200.0, 300.0, 400.0]  # the timed-out request is not in the percentiles
    assert s0.ttft_ms.count == 4
    assert s0.ttft_ms.p50 == pytest.approx(np.percentile(ttfts, 50))
    assert s0.ttft_ms.p99 == pytest.approx(np.percentile(ttfts, 99))
    assert s0.ttft_ms.mean == pytest.approx(250.0)
    gaps = [10, 20, 30, 40, 40, 40, 50]
    assert s0.itl_ms.count == len(gaps)
    assert s0.itl_ms.p50 == pytest.approx(np.percentile(gaps, 50))
    assert s0.itl_ms.p95 == pytest.approx(np.percentile(gaps, 95))
    assert s0.itl_ms.mean == pytest.approx(np.mean(gaps))
    e2e = [100 + 30 + 1, 200 + 30 + 1, 300 + 120 + 1, 400 + 50 + 1]
    assert s0.e2e_ms.p99 == pytest.approx(np.percentile(e2e, 99))
    assert s0.output_tokens_per_s == pytest.approx((3 + 2 + 4 + 2) / 10.0)  # successful requests' tokens
    assert s0.request_rate == pytest.approx(0.5)
    assert s0.goodput == pytest.approx(2 / 5)  # TTFT <= 250 ms and no error
    assert s0.client_cached_tokens == 950 + 500 + 0
    assert s0.hit_tokens.source == "none" and s0.hit_tokens.gpu is None
    classes = {c.hit_class: (c.requests, c.ttft_ms.p50) for c in s0.ttft_by_hit_class}
    assert classes == {"mostly-cached": (1, 100.0), "partial": (1, 200.0), "recomputed": (1, 300.0)}
    s1 = steps[1]
    assert (s1.concurrency, s1.requests, s1.errors, s1.duration_s) == (8, 2, 1, 2.0)
    assert s1.errors_by_kind == {"http_5xx": 1}


def test_without_steps_file_the_records_span_is_the_duration() -> None:
    steps = step_table(frame(_records()), SloSpec())
    s0 = steps[0]
    # first send at 1000 ms, last event: the timed-out request's first token at 5000 + 5000 ms
    assert s0.duration_s == pytest.approx((10000 - 1000 + 1) / 1000)
    assert s0.label == "c4" and s0.concurrency == 4
    assert s0.goodput == pytest.approx(4 / 5)  # no SLO set: every successful request counts


def test_send_lag_reported() -> None:
    steps = step_table(frame([record("a", 0, 0, 10, [1], lag_ms=1.0), record("a", 0, 1, 10, [1], lag_ms=3.0)]),
                       SloSpec())
    assert steps[0].client.send_lag_ms_p50 == pytest.approx(2.0)


def test_goodput_uses_every_slo() -> None:
    recs = [record("a", 0, 0, 100.0, [10, 10]), record("a", 0, 1, 100.0, [90, 90]),
            record("a", 0, 2, 100.0, [10] * 50)]
    slo = SloSpec(ttft_p99_ms=150.0, itl_p99_ms=20.0, e2e_p99_ms=400.0)
    # 1st: all good; 2nd: mean ITL 90 > 20; 3rd: e2e 100 + 500 + 1 > 400
    assert step_table(frame(recs), slo)[0].goodput == pytest.approx(1 / 3)


def test_several_arms_need_a_choice() -> None:
    df = frame([record("a", 0, 0, 10, [1]), record("b", 0, 0, 20, [2]), record("b", 0, 1, 30, [2])])
    with pytest.raises(ValueError, match="several arms"):
        step_table(df, SloSpec())
    steps = step_table(df, SloSpec(), arm="b")
    assert steps[0].requests == 2 and steps[0].ttft_ms.p50 == pytest.approx(25.0)
    both = analyze_arms(df, SloSpec(), 10.0)
    assert list(both) == ["a", "b"]
    assert both["a"].steps[0].requests == 1 and both["b"].steps[0].itl_ms.count == 2


def test_step_with_a_span_but_no_records() -> None:
    spans = [StepEntry(arm="a", step=0, label="c4", concurrency=4, start_ns=0, end_ns=10**9),
             StepEntry(arm="a", step=1, label="c8", concurrency=8, start_ns=2 * 10**9, end_ns=3 * 10**9)]
    df = frame([record("a", 0, 0, 10, [1])])
    steps = step_table(df, SloSpec(), steps=spans)
    assert [s.requests for s in steps] == [1, 0]
    assert steps[1].ttft_ms.count == 0 and steps[1].ttft_ms.p50 is None and steps[1].goodput is None
    assert steps[1].itl_ms.count == 0


def test_empty_frame() -> None:
    assert step_table(frame([]), SloSpec()) == []
    assert analyze_arms(frame([]), SloSpec(), 5.0) == {}
