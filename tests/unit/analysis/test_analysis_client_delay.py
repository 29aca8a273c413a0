"""The first-token client delay: per request (arrival to parse, derived from the record's two times), per step in the
step table, and absent (never 0) for records written before the parse time was kept."""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from analysis_helpers import MS, frame, record

from harness.analysis import derive_latencies, load_requests, step_table
from harness.analysis.load import table_to_frame
from harness.config.rules import SloSpec
from harness.rundir.records import SCHEMA, RequestRecord

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "runs"


def _parsed(rec: RequestRecord, delay_ms: float, source: str = "kernel") -> RequestRecord:
    assert rec.first_token_ns is not None
    return dataclasses.replace(rec, first_token_parsed_ns=rec.first_token_ns + round(delay_ms * MS),
                               first_token_source=source)


def test_delay_and_parse_time_ttft_per_request() -> None:
    df = derive_latencies(frame([_parsed(record("a", 0, 0, 100.0, [10]), 2.5),
                                 record("a", 0, 10, 50.0, [10])]))  # an older record: one time only
    assert df["ttft_ms"].tolist() == [100.0, 50.0]  # TTFT: the first token's arrival
    assert df["ttft_parsed_ms"].iloc[0] == pytest.approx(102.5)
    assert df["first_token_client_delay_ms"].iloc[0] == pytest.approx(2.5)
    assert math.isnan(df["ttft_parsed_ms"].iloc[1]) and math.isnan(df["first_token_client_delay_ms"].iloc[1])


def test_step_table_has_the_delay_of_every_request_with_both_times() -> None:
    delays = [0.5, 1.0, 1.5, 2.0, 40.0]
    recs = [_parsed(record("a", 0, 100 * i, 100.0, [10], rid=f"r{i}"), d) for i, d in enumerate(delays)]
    recs.append(_parsed(record("a", 0, 900, 100.0, [], error="timeout", rid="bad"), 3.0))  # errors count too
    recs.append(record("a", 1, 2000, 100.0, [10], concurrency=8, rid="old"))  # a step without the parse time
    steps = step_table(frame(recs), SloSpec())
    first, second = steps
    d = first.first_token_delay_ms
    assert d is not None and d.count == 6
    values = [*delays, 3.0]
    assert d.p50 == pytest.approx(float(np.percentile(values, 50)))
    assert d.p99 == pytest.approx(float(np.percentile(values, 99)))
    assert d.p50_ci is None and d.p99_ci is None  # a client-health figure: no intervals
    assert second.first_token_delay_ms is None  # not recorded, never 0
    assert first.ttft_ms.p50 == pytest.approx(100.0)  # arrival-based TTFT, whatever the parse delay


def test_old_record_parts_and_requests_files_still_analyse(tmp_path: Path) -> None:
    """A run written before the columns existed (the pre-layout fixture) loads, derives and tabulates."""
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "demo-prelayout", run)
    assert "first_token_parsed_ns" not in pq.read_schema(run / "requests.parquet").names
    df = derive_latencies(load_requests(run))
    assert df["first_token_client_delay_ms"].isna().all()
    steps = step_table(df[df["arm"] == df["arm"].iloc[0]], SloSpec())
    assert steps and all(s.first_token_delay_ms is None for s in steps)


def test_a_part_without_the_new_columns_reads_with_them_empty(tmp_path: Path) -> None:
    from harness.rundir.parts import read_parts

    old_schema = pa.schema([f for f in SCHEMA if f.name not in ("first_token_parsed_ns", "first_token_source")])
    row = record("a", 0, 0, 100.0, [10]).to_row()
    old = pa.Table.from_pylist([{k: v for k, v in row.items() if k in old_schema.names}], schema=old_schema)
    pq.write_table(old, tmp_path / "part-s000-c4-1-00000.parquet")
    table, warnings = read_parts([tmp_path / "part-s000-c4-1-00000.parquet"])
    assert warnings == [] and table.column("first_token_parsed_ns").null_count == 1
    df = derive_latencies(table_to_frame(table))
    assert math.isnan(df["first_token_client_delay_ms"].iloc[0]) and df["ttft_ms"].iloc[0] == 100.0
