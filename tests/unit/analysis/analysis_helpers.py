"""Request records for the analysis tests: exact timings so expected percentiles can be computed by hand."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import pyarrow as pa

from harness.analysis.load import table_to_frame
from harness.rundir.records import SCHEMA, RequestRecord

MS = 1_000_000
BASE = 5_000_000_000_000_000  # a large perf_counter reading: float64 would lose nanoseconds here


def record(arm: str, step: int, send_ms: float, ttft_ms: float, gaps_ms: Sequence[float], *, error: str | None = None,
           prompt: int | None = 1000, cached: int | None = None, label: str | None = None,
           concurrency: int | None = 4, lag_ms: float = 0.0, rid: str = "r") -> RequestRecord:
    """One request sent at ``send_ms``; first token after ``ttft_ms``; then one chunk per gap."""
    send = BASE + round(send_ms * MS)
    chunks = [send + round(ttft_ms * MS)]
    for gap in gaps_ms:
        chunks.append(chunks[-1] + round(gap * MS))
    end = chunks[-1] + MS
    return RequestRecord(
        arm=arm, step=step, step_label=label or f"c{concurrency}", concurrency=concurrency, rate_rps=None, user=0,
        request_id=rid, request_class="short", prefix_family=None, session_id=None, turn=None, api="completions",
        planned_send_ns=send - round(lag_ms * MS), send_ns=send, send_wall_ns=send, first_byte_ns=chunks[0],
        first_token_ns=chunks[0], end_ns=end, chunk_ns=chunks, prompt_tokens_target=prompt or 0,
        output_tokens_target=len(chunks), prompt_tokens=prompt, output_tokens=len(chunks), cached_tokens=cached,
        http_status=500 if error else 200, error_kind=error,
    )


def frame(records: Sequence[RequestRecord]) -> pd.DataFrame:
    """The DataFrame load_requests would give for these records."""
    return table_to_frame(pa.Table.from_pylist([r.to_row() for r in records], schema=SCHEMA))
