"""Record parts: atomic flushes by count and by time, and requests.parquet that survives a corrupt part."""

from __future__ import annotations

import logging
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness.rundir.parts import (
    REQUESTS_SCHEMA,
    PartWriter,
    build_requests_parquet,
    count_rows,
    find_parts,
    part_prefix,
)
from harness.rundir.records import SCHEMA, RequestRecord


def record(i: int, error: str | None = None) -> RequestRecord:
    return RequestRecord(arm="cpu", step=0, step_label="c4", concurrency=4, rate_rps=None, user=i % 4,
                         request_id=f"cpu/s0/u{i}", request_class="short", prefix_family="sys:1", session_id=None,
                         turn=None, api="chat", planned_send_ns=1000 + i, send_ns=1001 + i,
                         send_wall_ns=10**18 + i, first_token_ns=2000 + i, end_ns=3000 + i, chunk_ns=[2000 + i],
                         error_kind=error, hash_ids=[1, 2, 3], hash_block_tokens=512)


def test_part_names() -> None:
    assert part_prefix(3, "c16") == "part-s003-c16"
    assert part_prefix(-1, "warmup") == "part-warmup-warmup"
    assert part_prefix(-2, "c4", "cache_loss", "during") == "part-d002-c4-cache_loss-during"


def test_flush_by_count_and_at_the_end(tmp_path: Path) -> None:
    writer = PartWriter(tmp_path / "records" / "cpu", "part-s000-c4", flush_every=3, flush_interval_s=3600)
    for i in range(7):
        writer.add(record(i, "stalled" if i == 5 else None))
    assert len(writer.parts) == 2 and writer.written == 6
    writer.flush()
    assert writer.flush() is None  # nothing left
    parts = find_parts(tmp_path / "records", "part-s000")
    assert len(parts) == 3 and not list((tmp_path / "records" / "cpu").glob(".*tmp"))
    assert count_rows(parts) == (7, 1)
    table = pq.read_table(parts[0])
    assert table.schema.equals(SCHEMA)


def test_flush_by_age(tmp_path: Path) -> None:
    writer = PartWriter(tmp_path, "part-s001-c1", flush_every=1000, flush_interval_s=0.0)
    writer.add(record(1))
    assert writer.written == 1 and not writer.due()


def test_requests_parquet_skips_a_corrupt_part(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    writer = PartWriter(tmp_path / "records" / "gpu-only", "part-s000-c1", flush_every=2)
    for i in range(4):
        writer.add(record(i))
    other = PartWriter(tmp_path / "records" / "cpu", "part-s000-c1", flush_every=100)
    other.add(record(10))
    other.flush()
    last = writer.parts[-1]
    last.write_bytes(last.read_bytes()[:50])  # a crash mid-write of a part written in place
    with caplog.at_level(logging.WARNING):
        path = build_requests_parquet(tmp_path)
    table = pq.read_table(path)
    assert table.num_rows == 3
    assert table.schema.equals(REQUESTS_SCHEMA)
    assert table.column("send_wall_ns").to_pylist() == sorted(table.column("send_wall_ns").to_pylist())
    assert any("skipped unreadable record part" in r.message and last.name in r.message for r in caplog.records)


def test_requests_parquet_of_an_empty_run(tmp_path: Path) -> None:
    table = pq.read_table(build_requests_parquet(tmp_path))
    assert table.num_rows == 0 and table.schema.equals(REQUESTS_SCHEMA)
