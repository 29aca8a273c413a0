"""Server-sent events of an OpenAI-compatible stream -> per-chunk arrival times, usage and errors.

The decoder is fed one line at a time with two times (``perf_counter_ns``): when the parser got to the line, and
when its bytes arrived (the wire time of :mod:`harness.load.lines`, with its source). Chunk times and the first
token's time are arrival times; the first token's parse time is kept beside them (``first_token_parsed_ns``), so
the client's own delay (parsed - arrived) can be told from the server's latency. It follows the SSE framing
(``data:`` lines, events ended by a blank line, ``:`` comments, ``event:``/``id:``/``retry:`` fields) and is strict
about everything else: a line that is no SSE field, a ``data`` payload that is not JSON (other than ``[DONE]``) or
not an object ends the stream as ``malformed_stream``; an ``{"error": ...}`` event ends it as ``http_5xx`` (or
``http_4xx`` for a 4xx code). A stream that ends without ``[DONE]`` is ``incomplete`` (see :meth:`finish`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from harness.rundir.records import ErrorKind

_loads: Callable[[bytes], Any]
try:  # orjson parses an event ~4x faster than json: ~30% less client CPU per token (docs/perf.md)
    import orjson

    _loads = orjson.loads
except ImportError:  # pragma: no cover - the standard library does the same, slower
    _loads = json.loads

_FIELDS = (b"event", b"id", b"retry")
# How a first-token time was taken (the record's ``first_token_source``): the kernel's receive time, the time the
# read that brought the bytes returned (both from harness.load.lines), or when the parser got to the line.
KERNEL, READABLE, PARSED = "kernel", "readable", "parsed"
MAX_DETAIL = 300


def excerpt(data: bytes | str, limit: int = 120) -> str:
    """A short printable excerpt of a payload for error details."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    text = text.strip().replace("\n", "\\n")
    return text if len(text) <= limit else text[:limit] + "..."


@dataclass
class StreamState:
    """What a stream told us so far."""

    chunk_ns: list[int] = field(default_factory=list)  # arrival of every content chunk (wire time)
    first_token_ns: int | None = None  # arrival of the first content chunk (wire time)
    first_token_parsed_ns: int | None = None  # when the parser got to it
    first_token_source: str | None = None  # how first_token_ns was taken (kernel, readable, parsed)
    last_event_ns: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    response_id: str | None = None
    finish_reason: str | None = None
    done: bool = False
    done_ns: int | None = None
    error_kind: ErrorKind | None = None
    error_detail: str | None = None

    @property
    def ended(self) -> bool:
        """True once ``[DONE]`` or an error was seen: stop reading."""
        return self.done or self.error_kind is not None


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class SseDecoder:
    """Incremental decoder of one streamed chat or completions response."""

    __slots__ = ("_chat", "_data", "_data_ns", "_data_source", "_data_wire_ns", "state")

    def __init__(self, api: str) -> None:
        self._chat = api != "completions"
        self._data: list[bytes] = []
        self._data_ns = 0  # parse time of the event's first data line: when its content was on hand
        self._data_wire_ns = 0  # arrival of that line's bytes
        self._data_source = PARSED
        self.state = StreamState()

    def _fail(self, kind: ErrorKind, detail: str) -> bool:
        if self.state.error_kind is None:
            self.state.error_kind = kind
            self.state.error_detail = detail[:MAX_DETAIL]
        return True

    def feed_line(self, line: bytes, t_ns: int, wire_ns: int | None = None, source: str = PARSED) -> bool:
        """Feed one line (with or without its line ending) that the parser got to at ``t_ns`` and whose bytes
        arrived at ``wire_ns`` (taken as ``source``; None: ``t_ns``, source ``parsed``); return True when the stream
        has ended."""
        line = line.rstrip(b"\r\n")
        if not line:
            if self._data:
                payload = b"\n".join(self._data)
                self._data.clear()
                return self._event(payload)
            return self.state.ended
        if line.startswith(b"data:"):
            if not self._data:
                self._data_ns = t_ns
                if wire_ns is None:
                    self._data_wire_ns, self._data_source = t_ns, PARSED
                else:
                    self._data_wire_ns, self._data_source = wire_ns, source
            value = line[5:]
            self._data.append(value[1:] if value.startswith(b" ") else value)
            return False
        if line.startswith(b":"):
            return False
        name = line.split(b":", 1)[0]
        if name in _FIELDS:
            return False
        return self._fail("malformed_stream", f"not an SSE line: {excerpt(line)}")

    def _event(self, payload: bytes) -> bool:
        st = self.state
        t_ns = self._data_ns
        st.last_event_ns = t_ns
        if payload.strip() == b"[DONE]":
            st.done = True
            st.done_ns = t_ns
            return True
        try:
            obj = _loads(payload)
        except ValueError:
            return self._fail("malformed_stream", f"data is not JSON: {excerpt(payload)}")
        if not isinstance(obj, dict):
            return self._fail("malformed_stream", f"data is not a JSON object: {excerpt(payload)}")
        if "error" in obj:
            return self._server_error(obj["error"])
        if st.response_id is None and isinstance(obj.get("id"), str):
            st.response_id = obj["id"]
        choices = obj.get("choices")
        if isinstance(choices, list) and choices:
            choice = choices[0]
            if not isinstance(choice, dict):
                return self._fail("malformed_stream", f"choices[0] is not an object: {excerpt(payload)}")
            if self._has_token(choice):
                wire = self._data_wire_ns
                if st.first_token_ns is None:
                    st.first_token_ns, st.first_token_parsed_ns = wire, t_ns
                    st.first_token_source = self._data_source
                st.chunk_ns.append(wire)
            reason = choice.get("finish_reason")
            if isinstance(reason, str):
                st.finish_reason = reason
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self._usage(usage)
        return False

    def _has_token(self, choice: dict[str, Any]) -> bool:
        if self._chat:
            delta = choice.get("delta")
            if not isinstance(delta, dict):
                return False
            content = delta.get("content") or delta.get("reasoning_content") or delta.get("reasoning")
            return isinstance(content, str) and content != ""
        text = choice.get("text")
        return isinstance(text, str) and text != ""

    def _usage(self, usage: dict[str, Any]) -> None:
        st = self.state
        st.prompt_tokens = _int_or_none(usage.get("prompt_tokens")) or st.prompt_tokens
        completion = _int_or_none(usage.get("completion_tokens"))
        if completion is not None:
            st.completion_tokens = completion
        details = usage.get("prompt_tokens_details")
        if isinstance(details, dict):
            cached = _int_or_none(details.get("cached_tokens"))
            if cached is not None:
                st.cached_tokens = cached

    def _server_error(self, err: Any) -> bool:
        code = err.get("code") if isinstance(err, dict) else None
        message = err.get("message") if isinstance(err, dict) else err
        kind: ErrorKind = "http_4xx" if isinstance(code, int) and 400 <= code < 500 else "http_5xx"
        return self._fail(kind, f"error event in the stream: {excerpt(str(message))}")

    def finish(self) -> StreamState:
        """The stream's connection ended: dispatch a pending event; no ``[DONE]`` means ``incomplete``."""
        if self._data and not self.state.ended:
            payload = b"\n".join(self._data)
            self._data.clear()
            self._event(payload)
        if not self.state.ended:
            self._fail("incomplete", f"the stream ended without [DONE] after {len(self.state.chunk_ns)} "
                                     "token chunk(s)")
        return self.state
