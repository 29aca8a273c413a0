"""Mooncake JSONL straight to a :class:`BlockTrace`, fast: pyarrow's JSON reader first, the exact reader second.

pyarrow parses the file with an explicit schema (``timestamp`` float64, lengths int64, ``hash_ids``
list<int64>, other keys ignored) several times faster than ``json.loads`` per line.  It rejects what the line
reader rejects (wrong types, floats where integers belong, out-of-range integers, non-object lines, duplicate
keys); what it accepts is then checked in bulk (no nulls, finite non-negative timestamps, non-negative lengths).
Whenever either step fails, the file is read again by :func:`harness.trace.mooncake.read_mooncake`, which is
the reference: it names the exact line and reason, or skips bad lines.  So both paths give the same trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, BinaryIO, Literal

import numpy as np

from harness.core.input_files import InputFileError, open_regular
from harness.trace.blocks import BlockTrace, from_requests
from harness.trace.mooncake import MAX_JSON_DEPTH, MAX_TRACE_BYTES, BadLine, TraceFormatError, read_mooncake

_BLOCK_SIZE = 16 << 20  # bytes per pyarrow parse block; a longer line falls back to the exact reader
_SCAN_CHUNK = 1 << 20  # bytes per pass of the line scan: its int32 running count is 4 MiB, not 8x a parse block


def _line_extremes(handle: BinaryIO) -> tuple[int, int]:
    """``(most [ and { on one line, longest line in bytes)``: an upper bound of any line's JSON depth and the
    longest line, in one chunked numpy pass."""
    carry = worst = 0
    run = longest = 0  # bytes of the line still open at the chunk's end; the longest line seen
    while chunk := handle.read(_SCAN_CHUNK):  # bounded: the file's size (a regular file under the cap)
        data = np.frombuffer(chunk, dtype=np.uint8)
        cum = np.cumsum((data == ord("[")) | (data == ord("{")), dtype=np.int32)
        ends = np.flatnonzero(data == ord("\n"))
        if ends.size:
            at = cum[ends]
            per_line = np.diff(at, prepend=0)
            per_line[0] += carry
            worst = max(worst, int(per_line.max()))
            carry = int(cum[-1] - at[-1])
            spans = np.diff(ends, prepend=-1)
            spans[0] += run
            longest = max(longest, int(spans.max()))
            run = len(chunk) - 1 - int(ends[-1])
        else:
            carry += int(cum[-1])
            run += len(chunk)
        worst = max(worst, carry)
        longest = max(longest, run)
    return worst, longest


def _fast(path: Path, block_tokens: int) -> BlockTrace | None:
    """The trace via pyarrow, or ``None`` when anything needs the exact reader's judgement (a line that may nest
    deeper than the exact reader allows, in a field pyarrow would ignore, included, and a line as long as a parse
    block, which the exact reader refuses or reads without pyarrow's copies of it)."""
    with open_regular(path, max_bytes=MAX_TRACE_BYTES, what="trace") as handle:
        depth, longest = _line_extremes(handle)
        if depth > MAX_JSON_DEPTH or longest >= _BLOCK_SIZE:  # pyarrow would buffer a whole over-long line
            return None
        handle.seek(0)
        return _parse(handle, path, block_tokens)


def _parse(handle: BinaryIO, path: Path, block_tokens: int) -> BlockTrace | None:
    """Parse the open trace with pyarrow and check it in bulk; ``None`` where the exact reader must judge."""
    import pyarrow as pa
    import pyarrow.json as pj

    schema = pa.schema(
        [
            ("timestamp", pa.float64()),
            ("input_length", pa.int64()),
            ("output_length", pa.int64()),
            ("hash_ids", pa.list_(pa.int64())),
        ]
    )
    try:
        table: Any = pj.read_json(
            handle,
            read_options=pj.ReadOptions(block_size=_BLOCK_SIZE),
            parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    if table.num_rows == 0 or any(table.column(name).null_count for name in schema.names):
        return None
    ids = table.column("hash_ids").combine_chunks()
    values = ids.flatten()
    if values.null_count:
        return None
    stamps = np.asarray(table.column("timestamp").to_numpy(), dtype=np.float64)
    inputs = np.asarray(table.column("input_length").to_numpy(), dtype=np.int64)
    outputs = np.asarray(table.column("output_length").to_numpy(), dtype=np.int64)
    if not (np.isfinite(stamps).all() and (stamps >= 0).all() and (inputs >= 0).all() and (outputs >= 0).all()):
        return None
    lengths = np.asarray(ids.value_lengths().to_numpy(zero_copy_only=False), dtype=np.int64)
    offsets = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return BlockTrace(
        timestamps_ms=stamps,
        input_tokens=inputs,
        output_tokens=outputs,
        offsets=offsets,
        block_ids=np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.int64),
        block_tokens=block_tokens,
        source=str(path),
    )


def read_mooncake_blocks(
    path: Path, block_tokens: int, on_bad_line: Literal["skip", "stop"] = "stop"
) -> tuple[BlockTrace, list[BadLine]]:
    """Read a Mooncake trace into blocks; errors and skipping exactly as :func:`read_mooncake`."""
    try:
        fast = _fast(path, block_tokens)
    except InputFileError as exc:
        raise TraceFormatError(str(exc)) from None
    if fast is not None:
        return fast, []
    trace = read_mooncake(path, on_bad_line=on_bad_line)
    return from_requests(trace.requests, block_tokens, str(path)), trace.bad_lines
