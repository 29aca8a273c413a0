"""The packed-key gap statistics agree exactly with numpy on the same gaps, across blocks and Arrow chunks."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from analysis_helpers import BASE, MS, frame, record

from harness.analysis.gapstats import gap_stats
from harness.analysis.latency import chunk_gaps
from harness.analysis.prepare import prepare, window_layout
from harness.rundir.entries import StepEntry
from harness.rundir.records import RequestRecord


def _random_records(seed: int, n: int) -> list[RequestRecord]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        gaps = list(rng.gamma(2.0, 8.0, int(rng.integers(0, 12))))
        out.append(record("a", int(rng.integers(0, 3)), float(rng.uniform(0, 30000)), float(rng.uniform(5, 300)),
                          gaps, error="timeout" if rng.random() < 0.1 else None, rid=f"r{i}"))
    return out


def _reference(df: pd.DataFrame, prep_codes: np.ndarray,
               window_of: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> tuple[np.ndarray, ...]:
    gaps = chunk_gaps(df)
    ok = df["ok"].to_numpy(dtype=bool)
    keep = ok[gaps.row] & (prep_codes[gaps.row] >= 0)
    values = gaps.ms.astype(np.float32)[keep].astype(np.float64)
    return values, prep_codes[gaps.row][keep], window_of(gaps.at_ns[keep], prep_codes[gaps.row][keep])


@pytest.mark.parametrize(("seed", "block"), [(1, 5), (2, 1 << 15), (3, 7)])
def test_matches_numpy(seed: int, block: int) -> None:
    spans = [StepEntry(arm="a", step=s, start_ns=BASE, end_ns=BASE + 40_000 * MS) for s in range(3)]
    prep = prepare(frame(_random_records(seed, 300)), steps=spans)
    layout = window_layout(prep, 7.0)
    stats = gap_stats(prep, layout, block=block)

    def window_of(at: np.ndarray, group: np.ndarray) -> np.ndarray:
        k = np.clip((at - prep.start[group]) // layout.window_ns, 0, layout.count[group] - 1)
        return np.asarray(layout.base[group] + k)

    values, groups, wins = _reference(prep.df, prep.row_group, window_of)
    assert len(stats.keys) == len(values)
    for g in range(len(prep.groups)):
        mine = values[groups == g]
        got = stats.group_percentiles(g)
        assert got.count == len(mine)
        for q, value in ((50, got.p50), (95, got.p95), (99, got.p99)):
            assert value == pytest.approx(np.percentile(mine, q), rel=1e-9)
        assert got.mean == pytest.approx(mine.mean(), rel=1e-6)
    p99 = stats.window_quantile(99.0)
    for w in range(layout.total):
        mine = values[wins == w]
        if len(mine):
            assert p99[w] == pytest.approx(np.percentile(mine, 99), rel=1e-9)
        else:
            assert np.isnan(p99[w])


def test_chunked_sliced_and_null_lists() -> None:
    recs = [record("a", 0, i * 10.0, 5.0, [1.0 + i, 2.0 + i]) for i in range(6)]
    base = frame(recs)
    arr = pa.array([r.chunk_ns for r in recs], type=pa.list_(pa.int64()))
    pieces = pa.chunked_array([arr.slice(0, 2), arr.slice(2, 3), pa.array([None], type=pa.list_(pa.int64()))])
    df = base.copy()
    df["chunk_ns"] = pd.Series(pd.arrays.ArrowExtensionArray(pieces))
    prep = prepare(df)
    stats = gap_stats(prep, window_layout(prep, None), block=3)
    got = stats.group_percentiles(0)
    expected = [1.0 + i for i in range(5)] + [2.0 + i for i in range(5)]  # the null list (6th request) adds none
    assert got.count == 10
    assert got.p50 == pytest.approx(np.percentile(expected, 50))
