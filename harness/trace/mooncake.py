"""Mooncake JSONL traces: read (with line-numbered errors), write, and synthesise.

One JSON object per line::

    {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, 48, 49, 50, 51]}

``timestamp`` is the arrival time in milliseconds, ``input_length`` / ``output_length`` are token counts and
``hash_ids`` name the prompt's blocks (512 tokens each in the published traces; the last one may be partial; the
example's list is shortened).
Two requests that share a leading run of ``hash_ids`` share that prompt prefix.  Extra keys are ignored, blank
lines are skipped.  This module is shared: the load generator replays traces read with :func:`read_mooncake`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeGuard

from harness.core.input_files import InputFileError, check_regular, iter_lines, open_regular
from harness.core.json_depth import JSON_DEPTH_LIMIT, json_too_deep

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

MOONCAKE_BLOCK_TOKENS = 512
"""Tokens per ``hash_ids`` block in the published Mooncake traces."""

MAX_TRACE_BYTES = 16 << 30
"""Largest trace file read (16 GiB); a larger one is refused before reading."""
MAX_LINE_BYTES = 64 << 20
"""Longest line read (64 MiB: a 4M-token prompt in the prompts format); ``/dev/zero`` has no newline."""
MAX_JSON_DEPTH = JSON_DEPTH_LIMIT
"""Deepest nesting of a JSON line (a Mooncake line nests 2 deep); deeper lines are bad lines, never a crash."""

_FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


class TraceFormatError(ValueError):
    """A trace line (or the whole trace) is not valid; the message names the file and the line."""


@dataclass(frozen=True)
class TraceRequest:
    """One request of a trace, in file order."""

    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]
    line_no: int


@dataclass(frozen=True)
class BadLine:
    """A line that could not be read, with the reason."""

    line_no: int
    reason: str


@dataclass
class MooncakeTrace:
    """The requests read from a file, plus the lines skipped in ``on_bad_line="skip"`` mode."""

    path: Path
    requests: list[TraceRequest] = field(default_factory=list)
    bad_lines: list[BadLine] = field(default_factory=list)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_timestamp(value: object) -> TypeGuard[int | float]:
    """A finite, non-negative JSON number (not a bool) that fits a float."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value) and value >= 0
    except OverflowError:  # an integer beyond the float range
        return False


def _parse_obj(obj: Any, line_no: int) -> TraceRequest | str:
    """Validate one decoded line; return the request or the reason it is bad."""
    if not isinstance(obj, dict):
        return f"expected a JSON object, got {type(obj).__name__}"
    missing = [name for name in _FIELDS if name not in obj]
    if missing:
        return "missing field(s) " + ", ".join(repr(m) for m in missing)
    ts = obj["timestamp"]
    if not is_timestamp(ts):
        return f"'timestamp' must be a finite number of milliseconds >= 0, got {ts!r}"
    inp, out = obj["input_length"], obj["output_length"]
    if not _is_int(inp) or inp < 0:
        return f"'input_length' must be an integer >= 0, got {inp!r}"
    if not _is_int(out) or out < 0:
        return f"'output_length' must be an integer >= 0, got {out!r}"
    ids = obj["hash_ids"]
    if not isinstance(ids, list):
        return f"'hash_ids' must be a list of integers, got {type(ids).__name__}"
    # fast check first (type(h) is int also rules out bool); locate the culprit only when it fails
    if not all(type(h) is int for h in ids) or (ids and not (min(ids) >= _I64_MIN and max(ids) <= _I64_MAX)):
        for pos, h in enumerate(ids):  # bounded: the list's length
            if not _is_int(h) or not _I64_MIN <= h <= _I64_MAX:
                return f"'hash_ids'[{pos}] must be a 64-bit integer, got {h!r}"
    return TraceRequest(float(ts), inp, out, tuple(ids), line_no)


@dataclass(frozen=True)
class JsonLine:
    """A decoded JSONL line's value (``BLANK`` for an empty line)."""

    value: Any


BLANK = JsonLine(None)


def decode_json_line(raw: bytes) -> JsonLine | str:
    """Decode one raw JSONL line: its value, ``BLANK`` for a blank line, or the reason it is not JSON."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    if not text.strip():
        return BLANK
    if json_too_deep(text):
        return f"nested deeper than {MAX_JSON_DEPTH} levels"
    try:
        return JsonLine(json.loads(text))
    except json.JSONDecodeError as exc:
        return f"not valid JSON ({exc.msg} at column {exc.colno})"
    except RecursionError:  # pragma: no cover - json_depth refuses such lines first
        return "nested too deeply"


def parse_line(raw: bytes, line_no: int) -> TraceRequest | str | None:
    """Parse one raw line: a request, the reason it is bad, or ``None`` for a blank line."""
    decoded = decode_json_line(raw)
    if isinstance(decoded, str):
        return decoded
    return None if decoded is BLANK else _parse_obj(decoded.value, line_no)


def read_mooncake(path: Path, *, on_bad_line: Literal["skip", "stop"] = "stop") -> MooncakeTrace:
    """Read a Mooncake JSONL trace.

    ``on_bad_line="stop"`` raises :class:`TraceFormatError` at the first bad line ("FILE:LINE: what is wrong");
    ``"skip"`` records it in :attr:`MooncakeTrace.bad_lines` and goes on.  Line numbers are 1-based.
    An empty trace is not an error here (``requests`` is empty); callers decide.
    A path that is not a regular file, too large a file or too long a line raise :class:`TraceFormatError`.
    """
    trace = MooncakeTrace(path=path)
    for line_no, raw in trace_lines(path):
        parsed = parse_line(raw, line_no)
        if parsed is None:
            continue
        if isinstance(parsed, str):
            if on_bad_line == "stop":
                raise TraceFormatError(f"{path}:{line_no}: {parsed}")
            trace.bad_lines.append(BadLine(line_no, parsed))
            continue
        trace.requests.append(parsed)
    return trace


def check_trace_file(path: Path) -> None:
    """Refuse a trace path that is not a regular file of at most :data:`MAX_TRACE_BYTES` (a FIFO, a device,
    a directory) with a :class:`TraceFormatError` naming it, without opening it."""
    try:
        check_regular(path, max_bytes=MAX_TRACE_BYTES, what="trace")
    except InputFileError as exc:
        raise TraceFormatError(str(exc)) from None


def trace_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """``(line number, raw line)`` of a trace file: regular files only, lines of at most :data:`MAX_LINE_BYTES`
    (a longer line, a FIFO or a device is a :class:`TraceFormatError` naming the file and the line)."""
    try:
        with open_regular(path, max_bytes=MAX_TRACE_BYTES, what="trace") as handle:
            yield from iter_lines(handle, str(path), max_line_bytes=MAX_LINE_BYTES, max_bytes=MAX_TRACE_BYTES)
    except InputFileError as exc:
        raise TraceFormatError(str(exc)) from None


def _format_ts(ts: float) -> int | float:
    return int(ts) if float(ts).is_integer() else ts


def write_mooncake(path: Path, requests: Iterable[TraceRequest]) -> int:
    """Write requests as Mooncake JSONL (one object per line, file order kept); return the number written."""
    count = 0
    with path.open("w", encoding="utf-8") as handle:
        for req in requests:  # bounded: the requests given
            if not math.isfinite(req.timestamp_ms):
                raise ValueError(f"request {count + 1}: timestamp {req.timestamp_ms!r} is not finite")
            # integers and finite floats print as valid JSON; this is several times faster than json.dumps
            ids = ", ".join(map(str, req.hash_ids))
            handle.write(
                f'{{"timestamp": {_format_ts(req.timestamp_ms)!r}, "input_length": {int(req.input_length)}, '
                f'"output_length": {int(req.output_length)}, "hash_ids": [{ids}]}}\n'
            )
            count += 1
    return count


def _zipf_probs(n: int, exponent: float) -> NDArray[np.float64]:
    import numpy as np

    weights = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** exponent
    probs: NDArray[np.float64] = weights / weights.sum()
    return probs


def synthesize_mooncake(
    n_requests: int,
    seed: int,
    *,
    n_system_prompts: int = 8,
    n_documents: int | None = None,
    zipf_exponent: float = 1.1,
    unique_share: float = 0.1,
    no_document_share: float = 0.3,
    mean_tail_blocks: float = 12.0,
    rate_per_s: float = 20.0,
    block_tokens: int = MOONCAKE_BLOCK_TOKENS,
) -> list[TraceRequest]:
    """A deterministic Mooncake-like trace with realistic prefix sharing (about 30 blocks per request).

    Each request is ``system prompt + document + unique tail``: the system prompt (2-8 blocks) and the
    document (4-64 blocks, log-uniform) are drawn Zipf-popular, so shared prefixes have varying lengths;
    ``no_document_share`` of requests skip the document, ``unique_share`` share nothing at all, and every
    tail (geometric, mean ``mean_tail_blocks``) is new.  Arrivals are Poisson at ``rate_per_s`` with whole
    millisecond timestamps (so ties occur).  Same arguments, same trace.
    """
    import numpy as np  # only the synthesiser needs numpy; readers of traces do not

    if n_requests < 0:
        raise ValueError("n_requests must be >= 0")
    rng = np.random.default_rng(seed)
    n_docs = n_documents if n_documents is not None else max(16, n_requests // 25)
    sys_len = rng.integers(2, 9, size=n_system_prompts)
    doc_len = np.exp(rng.uniform(np.log(4), np.log(65), size=n_docs)).astype(np.int64)
    sys_start = np.concatenate(([0], np.cumsum(sys_len)))
    doc_start = sys_start[-1] + np.concatenate(([0], np.cumsum(doc_len)))
    next_id = int(doc_start[-1])

    sys_pick = rng.choice(n_system_prompts, size=n_requests, p=_zipf_probs(n_system_prompts, zipf_exponent))
    doc_pick = rng.choice(n_docs, size=n_requests, p=_zipf_probs(n_docs, zipf_exponent))
    # shuffle document popularity ranks so popular documents are not all the low ids
    doc_pick = rng.permutation(n_docs)[doc_pick]
    kind = rng.uniform(size=n_requests)
    tails = rng.geometric(1.0 / mean_tail_blocks, size=n_requests)
    gaps = rng.exponential(1000.0 / rate_per_s, size=n_requests)
    stamps = np.floor(np.cumsum(gaps))
    last_fill = rng.integers(1, block_tokens + 1, size=n_requests)
    outputs = np.maximum(1, rng.lognormal(mean=5.0, sigma=1.0, size=n_requests)).astype(np.int64)

    has_sys = kind >= unique_share
    has_doc = kind >= unique_share + no_document_share
    tail_start = next_id + np.cumsum(tails) - tails
    # per request three id ranges (system prompt, document, tail), empty where absent, laid end to end
    seg_start = np.stack([sys_start[:-1][sys_pick], doc_start[:-1][doc_pick], tail_start], axis=1).ravel()
    seg_len = np.stack(
        [np.where(has_sys, sys_len[sys_pick], 0), np.where(has_doc, doc_len[doc_pick], 0), tails], axis=1
    ).ravel()
    seg_end = np.cumsum(seg_len)
    total = int(seg_end[-1]) if n_requests else 0
    ids = (np.repeat(seg_start - (seg_end - seg_len), seg_len) + np.arange(total)).tolist()
    offsets = np.concatenate(([0], seg_end[2::3])).tolist()
    blocks = np.diff(np.asarray(offsets, dtype=np.int64))
    inputs = ((blocks - 1) * block_tokens + last_fill).tolist()
    stamps_l, outputs_l = stamps.tolist(), outputs.tolist()
    return [
        TraceRequest(stamps_l[i], inputs[i], outputs_l[i], tuple(ids[offsets[i] : offsets[i + 1]]), i + 1)
        for i in range(n_requests)  # bounded: one pass over the requests
    ]
