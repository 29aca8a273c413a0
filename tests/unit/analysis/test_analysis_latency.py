"""Derived latencies: TTFT, E2E, per-request ITL from chunk gaps; exact with 64-bit clock readings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from analysis_helpers import BASE, MS, frame, record

from harness.analysis.latency import chunk_gaps, derive_latencies, ns_column


def test_derive_latencies_from_raw_times() -> None:
    df = derive_latencies(frame([
        record("a", 0, 0, 120.0, [10, 30], cached=950, lag_ms=2.5),
        record("a", 0, 5, 80.0, [], error="stalled", cached=0),
    ]))
    assert df["ttft_ms"].tolist() == pytest.approx([120.0, 80.0])
    assert df["e2e_ms"].tolist() == pytest.approx([161.0, 81.0])
    assert df["itl_ms_mean"].iloc[0] == pytest.approx(20.0)
    assert np.isnan(df["itl_ms_mean"].iloc[1])  # a single chunk has no gap
    assert df["n_chunks"].tolist() == [3, 1]
    assert df["ok"].tolist() == [True, False]
    assert df["hit_ratio"].tolist() == pytest.approx([0.95, 0.0])
    assert df["send_lag_ms"].iloc[0] == pytest.approx(2.5)


def test_missing_timestamps_give_nan_not_zero() -> None:
    rec = record("a", 0, 0, 10.0, [1.0])
    rec.first_token_ns = None
    rec.end_ns = None
    rec.chunk_ns = []
    rec.cached_tokens = None
    df = derive_latencies(frame([rec]))
    assert np.isnan(df["ttft_ms"].iloc[0]) and np.isnan(df["e2e_ms"].iloc[0])
    assert np.isnan(df["hit_ratio"].iloc[0])
    assert df["n_chunks"].iloc[0] == 0


def test_nanosecond_precision_survives_large_clock_readings() -> None:
    rec = record("a", 0, 0, 0.000001, [0.000001])  # 1 ns TTFT and 1 ns gap at BASE ~ 5e15 ns
    df = derive_latencies(frame([rec]))
    assert df["ttft_ms"].iloc[0] == pytest.approx(1e-6)
    values, valid = ns_column(df, "send_ns")
    assert values[0] == BASE and valid[0]


def test_plain_pandas_frames_work_too() -> None:
    rows = [record("a", 0, 0, 50.0, [5, 5]).to_row(), record("a", 0, 1, 60.0, [7]).to_row()]
    rows[1]["first_token_ns"] = None
    df = derive_latencies(pd.DataFrame(rows))
    assert df["ttft_ms"].iloc[0] == pytest.approx(50.0)
    assert np.isnan(df["ttft_ms"].iloc[1])
    gaps = chunk_gaps(df)
    assert gaps.row.tolist() == [0, 0, 1]
    assert gaps.ms.tolist() == pytest.approx([5.0, 5.0, 7.0])


def test_chunk_gaps_never_cross_requests() -> None:
    df = frame([record("a", 0, 0, 10.0, [1, 2]), record("a", 0, 0, 500.0, []), record("a", 0, 0, 10.0, [3])])
    gaps = chunk_gaps(df)
    assert gaps.row.tolist() == [0, 0, 2]
    assert gaps.ms.tolist() == pytest.approx([1.0, 2.0, 3.0])
    assert gaps.at_ns[0] == BASE + 11 * MS
    kept = gaps.select_rows(np.array([False, True, True]))
    assert kept.row.tolist() == [1] and kept.ms.tolist() == pytest.approx([3.0])
