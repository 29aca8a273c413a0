"""Loading a run's records (requests.parquet, or the parts of an interrupted run) and its steps file."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from analysis_helpers import BASE, record

from harness.analysis import load_requests
from harness.rundir.records import SCHEMA, RequestRecord
from tools.bench.analysis import main as bench_main


def _table(records: list[RequestRecord]) -> pa.Table:
    return pa.Table.from_pylist([r.to_row() for r in records], schema=SCHEMA)


def test_prefers_requests_parquet(tmp_path: Path) -> None:
    pq.write_table(_table([record("a", 0, 0, 1, [1], rid="whole")]), tmp_path / "requests.parquet")
    (tmp_path / "records" / "a").mkdir(parents=True)
    pq.write_table(_table([record("a", 0, 0, 1, [1], rid="part")]), tmp_path / "records" / "a" / "part-0.parquet")
    df = load_requests(tmp_path)
    assert df["request_id"].tolist() == ["whole"]
    assert df["send_ns"].iloc[0] == BASE  # exact 64-bit value
    assert isinstance(df["chunk_ns"].dtype, pd.ArrowDtype)


def test_falls_back_to_parts_and_skips_a_broken_one(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    for arm in ("a", "b"):
        (tmp_path / "records" / arm).mkdir(parents=True)
        pq.write_table(_table([record(arm, 0, 0, 1, [1], rid=arm)]), tmp_path / "records" / arm / "part-0.parquet")
    (tmp_path / "records" / "b" / "part-1.parquet").write_bytes(b"PAR1 torn write")
    with caplog.at_level(logging.WARNING):
        df = load_requests(tmp_path)
    assert sorted(df["request_id"]) == ["a", "b"]
    assert "part-1.parquet" in caplog.text


def test_no_records_gives_an_empty_frame_with_the_columns(tmp_path: Path) -> None:
    df = load_requests(tmp_path)
    assert df.empty and {"arm", "step", "chunk_ns", "send_ns"} <= set(df.columns)


def test_bench_runs_small(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main(["--records", "3000", "--chunks", "8", "--in-memory", "--json"]) == 0
    timings = json.loads(capsys.readouterr().out)
    assert timings["steps"] == 12 and timings["windows"] > 12
    assert timings["analysis_total_s"] > 0
    assert bench_main(["--records", "2000", "--chunks", "4"]) == 0
    assert "analysed 2,000 records" in capsys.readouterr().out


def test_a_part_cache_reads_each_part_once_and_gives_the_same_table(tmp_path: Path) -> None:
    from harness.analysis.load import PartCache, parts_table

    parts = []
    for i in range(3):
        parts.append(tmp_path / f"part-{i}.parquet")
        pq.write_table(_table([record("a", 0, i, i + 1, [1], rid=f"r{i}")]), parts[-1])
    cache: PartCache = {}
    assert parts_table(parts[:2], cache).equals(parts_table(parts[:2]))
    assert len(cache) == 2
    assert parts_table(parts, cache).equals(parts_table(parts)) and len(cache) == 3  # only the new part is read
    parts[0].write_bytes(b"PAR1 torn write")  # another file under the same name (size, time): read again
    assert parts_table(parts, cache).equals(parts_table(parts[1:]))
    assert parts_table([], cache).num_rows == 0
