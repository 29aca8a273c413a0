"""The per-request record: what the load generator writes and the analysis reads (one row per request).

Clocks: every ``*_ns`` field is ``time.perf_counter_ns()`` (CLOCK_MONOTONIC on Linux, shared by all processes on a
host) unless its name ends in ``_wall_ns`` (``time.time_ns()``, only for lining requests up with scrapes).
Raw chunk arrival times are kept; TTFT and inter-token latency are computed afterwards
(:func:`harness.analysis.latency.derive_latencies`).

Arrival times (``first_byte_ns``, ``first_token_ns``, ``chunk_ns``) are when the bytes reached the client: the
kernel's receive time where the platform gives one, else when the read that brought them returned
(:mod:`harness.load.lines`); ``first_token_source`` says which for the first token (``kernel``, ``readable``, or
``parsed`` where only the parse time was known). ``first_token_parsed_ns`` is when the client's parser got to the
first token: ``first_token_parsed_ns - first_token_ns`` is the client's own delay. Records written before these
columns existed have them empty: their arrival times are parse times.
"""

from __future__ import annotations

import types
import typing
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Final, Literal, Union

import pyarrow as pa

ErrorKind = Literal[
    "timeout", "connection", "http_5xx", "http_4xx", "malformed_stream", "incomplete", "stalled", "cancelled",
]
ERROR_KINDS: Final[tuple[ErrorKind, ...]] = typing.get_args(ErrorKind)
WARMUP_STEP = -1


@dataclass
class RequestRecord:
    """One request as sent and as observed by the client."""

    arm: str
    step: int  # index into steps.levels; WARMUP_STEP (-1) for warm-up, -2.. for drills
    step_label: str
    concurrency: int | None
    rate_rps: float | None
    user: int
    request_id: str
    request_class: str
    prefix_family: str | None
    session_id: str | None
    turn: int | None
    api: str
    planned_send_ns: int
    send_ns: int
    send_wall_ns: int
    first_byte_ns: int | None = None
    first_token_ns: int | None = None
    end_ns: int | None = None
    chunk_ns: list[int] = field(default_factory=list)  # arrival time of every content chunk, first included
    prompt_tokens_target: int = 0
    output_tokens_target: int = 0
    prompt_tokens: int | None = None  # from usage
    output_tokens: int | None = None  # from usage (or chunk count when usage is absent)
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens; None when not reported
    http_status: int | None = None
    error_kind: ErrorKind | None = None
    error_detail: str | None = None
    response_id: str | None = None
    hash_ids: list[int] = field(default_factory=list)  # chained block hashes of the planned prompt
    hash_block_tokens: int = 0
    drill: str | None = None
    drill_phase: str | None = None
    attempt: int = 1  # per arm and step: 1 for the first try, 2 for the redo after a resume, ... (rundir.attempts)
    first_token_parsed_ns: int | None = None  # when the client's parser got to the first token
    first_token_source: str | None = None  # how first_token_ns was taken: kernel | readable | parsed (None: older)

    def to_row(self) -> dict[str, Any]:
        """A plain dict for Arrow/JSON."""
        return asdict(self)


def _arrow_type(name: str, hint: Any) -> pa.DataType:
    """The Arrow type of one record field, from its annotation: ``*_ns`` times and lists of them int64, other ints
    int32, floats float64, strings (and Literals of strings) string; ``X | None`` is X, nullable."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (Union, types.UnionType):
        (hint,) = args
        args = list(typing.get_args(hint))
    if typing.get_origin(hint) is list:
        return pa.list_(pa.int64())
    if typing.get_origin(hint) is Literal or hint is str:
        return pa.string()
    if hint is float:
        return pa.float64()
    if hint is int:
        return pa.int64() if name.endswith("_ns") else pa.int32()
    raise TypeError(f"RequestRecord.{name}: no Arrow type for {hint!r}")


def _schema() -> pa.Schema:
    hints = typing.get_type_hints(RequestRecord)
    return pa.schema([(f.name, _arrow_type(f.name, hints[f.name])) for f in fields(RequestRecord)])


SCHEMA: Final = _schema()
"""The Arrow schema of the request parts, derived from :class:`RequestRecord` (one definition of the record)."""
