"""The client-health budget on the first-token client delay: read back from a step's record parts, summarised, and a
step over the budget flagged (saturated, with the numbers in the note)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from harness.config.load import FIRST_TOKEN_DELAY_P99_MS, LoadSpec
from harness.load.health import assess, delay_percentiles
from harness.load.step import StepRun, first_token_delays_ms
from harness.rundir.parts import PartWriter
from harness.rundir.records import SCHEMA, RequestRecord

MS = 1_000_000


def _record(i: int, delay_ms: float | None) -> RequestRecord:
    first = 10**12 + i * 10 * MS
    return RequestRecord(
        arm="a", step=0, step_label="c4", concurrency=4, rate_rps=None, user=i, request_id=f"a/s0/{i}",
        request_class="short", prefix_family=None, session_id=None, turn=None, api="completions",
        planned_send_ns=first - 50 * MS, send_ns=first - 50 * MS, send_wall_ns=first, first_byte_ns=first,
        first_token_ns=first, end_ns=first + 5 * MS, chunk_ns=[first],
        first_token_parsed_ns=None if delay_ms is None else first + round(delay_ms * MS),
        first_token_source=None if delay_ms is None else "kernel")


def _health(delay_p99: float | None, limit: float = FIRST_TOKEN_DELAY_P99_MS):  # type: ignore[no-untyped-def]
    delay = None if delay_p99 is None else delay_percentiles([0.2] * 90 + [delay_p99] * 10)
    return assess(cpu_s=1.0, wall_s=10.0, max_process_cpu_percent=10.0, lag_p50_ms=0.1, lag_p99_ms=1.0,
                  processes=1, first_token_delay=delay, delay_limit_ms=limit)


def test_a_delay_over_the_budget_flags_the_step() -> None:
    flagged = _health(32.0)
    assert flagged.saturated and flagged.note is not None
    assert "first tokens waited in the client p99 32.0 ms between arrival and parsing (limit 20 ms)" in flagged.note
    assert not _health(12.0).saturated and _health(12.0).note is None
    assert _health(12.0, limit=5).saturated
    assert not _health(None).saturated  # not recorded: nothing to judge
    assert _health(0.1, limit=0).saturated  # 0 flags every step that has the figure, as the other limits


def test_delay_percentiles() -> None:
    assert delay_percentiles([]) is None
    p = delay_percentiles([float(v) for v in range(1, 101)])
    assert p is not None and (p.p50, p.p95, p.p99, p.count) == (50.0, 95.0, 99.0, 100)
    assert p.mean == pytest.approx(50.5)


def test_delays_are_read_back_from_the_step_parts(tmp_path: Path) -> None:
    writer = PartWriter(tmp_path, "part-s000-c4", flush_every=3)
    for i, delay in enumerate([1.0, 2.5, None, 4.0]):
        writer.add(_record(i, delay))
    writer.flush()
    old_schema = pa.schema([f for f in SCHEMA if f.name not in ("first_token_parsed_ns", "first_token_source")])
    row = _record(9, None).to_row()
    pq.write_table(pa.Table.from_pylist([{k: row[k] for k in old_schema.names}], schema=old_schema),
                   tmp_path / "part-s000-c4-old-00000.parquet")
    (tmp_path / "part-s000-c4-bad-00000.parquet").write_bytes(b"not parquet")
    parts = sorted(tmp_path.glob("part-*.parquet"))
    assert len(parts) == 4
    assert sorted(first_token_delays_ms(parts)) == pytest.approx([1.0, 2.5, 4.0])


def test_the_budget_is_a_load_setting() -> None:
    assert LoadSpec().first_token_delay_p99_ms == FIRST_TOKEN_DELAY_P99_MS == 20.0
    assert LoadSpec(first_token_delay_p99_ms=0).first_token_delay_p99_ms == 0
    with pytest.raises(ValidationError):
        LoadSpec(first_token_delay_p99_ms=-1)
    assert StepRun.__dataclass_fields__["first_token_delay_p99_ms"].default == FIRST_TOKEN_DELAY_P99_MS
