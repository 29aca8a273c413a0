"""Trace readers: Mooncake JSONL, a run's ``requests.parquet`` (records) and prompt text (prompts), to blocks.

- ``mooncake``: see :mod:`harness.trace.mooncake`; blocks are the ``hash_ids`` (512 tokens unless
  ``--block-tokens`` says otherwise).
- ``records``: a run's ``requests.parquet``; columns ``send_wall_ns`` (int64 wall-clock ns), ``prompt_tokens``,
  ``hash_ids`` (list<int64>, chained block hashes) and ``hash_block_tokens`` (tokens per hash block, one value
  for the whole file).  Timestamps become milliseconds since the first send.  Row numbers are 1-based.
- ``prompts``: JSONL with ``timestamp`` (ms) and ``prompt`` (text), optional ``output_length``; a deterministic
  whitespace tokenizer (each whitespace-separated word is one token) cut into ``--block-tokens`` blocks (default
  16) with chained hashes, so two prompts share block ``i`` only if they share every token up to its end.
  The last block may be partial, as in Mooncake traces.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from harness.trace.blocks import BlockTrace, from_requests
from harness.trace.mooncake import (
    BLANK,
    MOONCAKE_BLOCK_TOKENS,
    BadLine,
    TraceFormatError,
    TraceRequest,
    check_trace_file,
    decode_json_line,
    is_timestamp,
    trace_lines,
)
from harness.trace.mooncake_columns import read_mooncake_blocks

TraceFormat = Literal["auto", "mooncake", "records", "prompts"]
OnBadLine = Literal["skip", "stop"]
PROMPT_BLOCK_TOKENS = 16
"""Default tokens per block for the prompts format (vLLM's default KV block size)."""
RECORD_COLUMNS = ("send_wall_ns", "prompt_tokens", "hash_ids", "hash_block_tokens")


@dataclass
class LoadedTrace:
    """A trace in block form, the format it was read as, and the lines (or rows) skipped."""

    trace: BlockTrace
    format: str
    bad_lines: list[BadLine] = field(default_factory=list)


DETECT_LINES = 1000
"""Lines :func:`detect_format` looks at for the first JSON object."""


def detect_format(path: Path) -> str:
    """``records`` for ``.parquet``; for JSONL the first JSON object decides: ``hash_ids`` means ``mooncake``,
    ``prompt`` means ``prompts``.  Lines that do not parse are passed over (the reader reports them by number);
    with no object at all, ``mooncake``."""
    if path.suffix.lower() == ".parquet":
        return "records"
    for line_no, raw in trace_lines(path):
        if line_no > DETECT_LINES:
            break
        decoded = decode_json_line(raw)
        if isinstance(decoded, str) or not isinstance(decoded.value, dict):
            continue
        obj = decoded.value
        if "hash_ids" in obj:
            return "mooncake"
        if "prompt" in obj:
            return "prompts"
        raise TraceFormatError(
            f"{path}:{line_no}: cannot detect the trace format (no 'hash_ids' or 'prompt' field); pass --format"
        )
    return "mooncake"


def chained_block_hashes(tokens: list[str], block_tokens: int) -> list[int]:
    """Signed 64-bit chained hashes of ``tokens`` cut into blocks (the last one may be partial)."""
    out: list[int] = []
    parent = b""
    for start in range(0, len(tokens), block_tokens):  # bounded: len(tokens) / block_tokens blocks
        # the parent digest has a fixed length and tokens never contain the \x1f separator (str.split drops it)
        payload = parent + "\x1f".join(tokens[start : start + block_tokens]).encode("utf-8")
        parent = hashlib.blake2b(payload, digest_size=8).digest()
        out.append(int.from_bytes(parent, "little", signed=True))
    return out


def _parse_prompt_line(raw: bytes, line_no: int, block_tokens: int) -> TraceRequest | str | None:
    decoded = decode_json_line(raw)
    if isinstance(decoded, str):
        return decoded
    if decoded is BLANK:
        return None
    obj: Any = decoded.value
    if not isinstance(obj, dict):
        return f"expected a JSON object, got {type(obj).__name__}"
    ts, prompt, out = obj.get("timestamp"), obj.get("prompt"), obj.get("output_length", 0)
    if not is_timestamp(ts):
        return f"'timestamp' must be a finite number of milliseconds >= 0, got {ts!r}"
    if not isinstance(prompt, str):
        return f"'prompt' must be a string, got {type(prompt).__name__}"
    if isinstance(out, bool) or not isinstance(out, int) or out < 0:
        return f"'output_length' must be an integer >= 0, got {out!r}"
    tokens = prompt.split()
    ids = tuple(chained_block_hashes(tokens, block_tokens))
    return TraceRequest(float(ts), len(tokens), out, ids, line_no)


def read_prompts(
    path: Path, block_tokens: int, on_bad_line: OnBadLine = "stop"
) -> tuple[list[TraceRequest], list[BadLine]]:
    """Read a prompts JSONL file into requests with chained block hashes."""
    requests: list[TraceRequest] = []
    bad: list[BadLine] = []
    for line_no, raw in trace_lines(path):
        parsed = _parse_prompt_line(raw, line_no, block_tokens)
        if parsed is None:
            continue
        if isinstance(parsed, str):
            if on_bad_line == "stop":
                raise TraceFormatError(f"{path}:{line_no}: {parsed}")
            bad.append(BadLine(line_no, parsed))
            continue
        requests.append(parsed)
    return requests, bad


def _records_table(path: Path) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise TraceFormatError(f"{path}: not a readable parquet file ({exc})") from None
    missing = [c for c in RECORD_COLUMNS if c not in schema.names]
    if missing:
        raise TraceFormatError(
            f"{path}: records file lacks column(s) {', '.join(missing)} (need {', '.join(RECORD_COLUMNS)})"
        )
    if "prompt_tokens_target" not in schema.names:
        return pq.read_table(path, columns=list(RECORD_COLUMNS))
    # A failed request has no usage (prompt_tokens is null) but was sent: count its planned prompt length.
    import pyarrow.compute as pc

    table = pq.read_table(path, columns=[*RECORD_COLUMNS, "prompt_tokens_target"])
    filled = pc.coalesce(table.column("prompt_tokens"), pc.cast(table.column("prompt_tokens_target"),
                                                                 table.schema.field("prompt_tokens").type))
    table = table.set_column(table.schema.get_field_index("prompt_tokens"), "prompt_tokens", filled)
    return table.drop_columns(["prompt_tokens_target"])


def read_records(
    path: Path, block_tokens: int | None, on_bad_line: OnBadLine = "stop"
) -> tuple[BlockTrace, list[BadLine]]:
    """Read a run's ``requests.parquet``; rows with nulls are bad rows (1-based row numbers)."""
    table = _records_table(path)
    n = table.num_rows
    ok = np.ones(n, dtype=np.bool_)
    bad: list[BadLine] = []
    for name in RECORD_COLUMNS:  # bounded: four columns
        nulls = np.asarray(table.column(name).is_null().to_numpy(zero_copy_only=False), dtype=np.bool_)
        rows = np.flatnonzero(nulls & ok)
        if rows.size and on_bad_line == "stop":
            raise TraceFormatError(f"{path}: row {int(rows[0]) + 1}: '{name}' is null")
        bad.extend(BadLine(int(r) + 1, f"'{name}' is null") for r in rows)
        ok &= ~nulls
    table = table.filter(ok) if not bool(ok.all()) else table
    kept_rows = np.flatnonzero(ok) + 1  # original 1-based row numbers of the rows kept
    sizes = np.unique(table.column("hash_block_tokens").to_numpy())
    if sizes.size > 1:
        raise TraceFormatError(f"{path}: 'hash_block_tokens' differs between rows ({sizes.tolist()}); cannot mix")
    file_tokens = int(sizes[0]) if sizes.size else (block_tokens or MOONCAKE_BLOCK_TOKENS)
    if file_tokens < 1:
        raise TraceFormatError(f"{path}: 'hash_block_tokens' must be >= 1, got {file_tokens}")
    if block_tokens is not None and block_tokens != file_tokens:
        raise TraceFormatError(
            f"{path}: the records were hashed in {file_tokens}-token blocks; --block-tokens {block_tokens} cannot "
            "re-cut them (drop --block-tokens)"
        )
    ids = table.column("hash_ids").combine_chunks()
    lengths = np.asarray(ids.value_lengths().to_numpy(zero_copy_only=False), dtype=np.int64)
    values = ids.flatten()
    if values.null_count:
        rows = np.repeat(np.arange(lengths.shape[0]), lengths)[values.is_null().to_numpy(zero_copy_only=False)]
        raise TraceFormatError(f"{path}: row {int(kept_rows[rows[0]])}: 'hash_ids' holds a null element")
    flat = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.int64)
    prompt_tokens = np.asarray(table.column("prompt_tokens").to_numpy(), dtype=np.int64)
    if prompt_tokens.size and int(prompt_tokens.min()) < 0:
        row = int(kept_rows[np.flatnonzero(prompt_tokens < 0)[0]])
        raise TraceFormatError(f"{path}: row {row}: 'prompt_tokens' must be >= 0")
    offsets = np.zeros(lengths.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    send_ns = np.asarray(table.column("send_wall_ns").to_numpy(), dtype=np.int64)
    t0 = int(send_ns.min()) if send_ns.size else 0
    trace = BlockTrace(
        timestamps_ms=(send_ns - t0).astype(np.float64) / 1e6,
        input_tokens=prompt_tokens,
        output_tokens=np.zeros(lengths.shape[0], dtype=np.int64),
        offsets=offsets,
        block_ids=flat,
        block_tokens=file_tokens,
        source=str(path),
    )
    return trace, bad


def load_trace(
    path: Path, fmt: TraceFormat = "auto", block_tokens: int | None = None, on_bad_line: OnBadLine = "stop"
) -> LoadedTrace:
    """Read ``path`` in ``fmt`` (``auto`` detects it) into blocks.

    Raises :class:`TraceFormatError` for bad content and for paths that are not regular files (a FIFO, a
    device), too large, or hold too long a line; ``OSError`` for unreadable files.
    """
    if block_tokens is not None and block_tokens < 1:
        raise TraceFormatError(f"--block-tokens must be >= 1, got {block_tokens}")
    check_trace_file(path)  # a FIFO, a device or a huge file is refused before any reader opens it
    kind = detect_format(path) if fmt == "auto" else fmt
    if kind == "records":
        trace, bad = read_records(path, block_tokens, on_bad_line)
        return LoadedTrace(trace, kind, bad)
    if kind == "prompts":
        tokens = block_tokens or PROMPT_BLOCK_TOKENS
        requests, bad = read_prompts(path, tokens, on_bad_line)
        return LoadedTrace(from_requests(requests, tokens, str(path)), kind, bad)
    if kind != "mooncake":
        raise TraceFormatError(f"unknown trace format {kind!r} (use mooncake, records or prompts)")
    trace, bad = read_mooncake_blocks(path, block_tokens or MOONCAKE_BLOCK_TOKENS, on_bad_line)
    return LoadedTrace(trace, kind, bad)
