"""One request-record definition: the Arrow schema of the parts is derived from ``RequestRecord``'s fields (same
names, order and types the parts were always written with), and the error kinds are the Literal's own values."""

from __future__ import annotations

import typing
from dataclasses import fields
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from harness.rundir.records import ERROR_KINDS, SCHEMA, ErrorKind, RequestRecord

PARTS_AS_WRITTEN = pa.schema([  # the schema every existing part and requests.parquet was written with
    ("arm", pa.string()), ("step", pa.int32()), ("step_label", pa.string()), ("concurrency", pa.int32()),
    ("rate_rps", pa.float64()), ("user", pa.int32()), ("request_id", pa.string()), ("request_class", pa.string()),
    ("prefix_family", pa.string()), ("session_id", pa.string()), ("turn", pa.int32()), ("api", pa.string()),
    ("planned_send_ns", pa.int64()), ("send_ns", pa.int64()), ("send_wall_ns", pa.int64()),
    ("first_byte_ns", pa.int64()), ("first_token_ns", pa.int64()), ("end_ns", pa.int64()),
    ("chunk_ns", pa.list_(pa.int64())), ("prompt_tokens_target", pa.int32()), ("output_tokens_target", pa.int32()),
    ("prompt_tokens", pa.int32()), ("output_tokens", pa.int32()), ("cached_tokens", pa.int32()),
    ("http_status", pa.int32()), ("error_kind", pa.string()), ("error_detail", pa.string()),
    ("response_id", pa.string()), ("hash_ids", pa.list_(pa.int64())), ("hash_block_tokens", pa.int32()),
    ("drill", pa.string()), ("drill_phase", pa.string()), ("attempt", pa.int32()),
    ("first_token_parsed_ns", pa.int64()), ("first_token_source", pa.string()),
])


def test_the_schema_is_the_records_fields_with_the_types_parts_were_written_with() -> None:
    assert SCHEMA.names == [f.name for f in fields(RequestRecord)]
    assert SCHEMA.equals(PARTS_AS_WRITTEN)


def test_error_kind_is_typed_by_the_literal_the_kinds_come_from() -> None:
    assert typing.get_args(ErrorKind) == ERROR_KINDS and len(set(ERROR_KINDS)) == len(ERROR_KINDS) == 8
    assert typing.get_type_hints(RequestRecord)["error_kind"] == ErrorKind | None


def test_a_record_round_trips_through_a_part(tmp_path: Path) -> None:
    record = RequestRecord(arm="a", step=0, step_label="c1", concurrency=1, rate_rps=None, user=0, request_id="r",
                           request_class="short", prefix_family=None, session_id=None, turn=None, api="chat",
                           planned_send_ns=1, send_ns=2, send_wall_ns=3, chunk_ns=[4, 5], error_kind="stalled")
    pq.write_table(pa.Table.from_pylist([record.to_row()], schema=SCHEMA), tmp_path / "p.parquet")
    (row,) = pq.read_table(tmp_path / "p.parquet").to_pylist()
    assert row == record.to_row()
