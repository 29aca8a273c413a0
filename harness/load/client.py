"""Streaming HTTP clients for the load generator (gevent): one request in, one :class:`Exchange` out.

Two backends with one interface, chosen by ``StepRun.client``:

- ``gevent`` (default): ``geventhttpclient``, the C-parser HTTP client locust's ``FastHttpUser`` uses. Lines
  are read straight off the parsed body buffer and stamped with ``perf_counter_ns`` as they arrive.
- ``httpx``: ``httpx`` over gevent-patched sockets, kept for comparison (``python -m harness.load.bench``
  measures both; httpx costs several times more client CPU per token).

Failures never raise: they are classified into the record's error kinds (``connection``, ``timeout`` for the
whole-request limit, ``stalled`` for a silent stream, ``http_4xx``/``http_5xx``, ``malformed_stream``,
``incomplete``). A kill from the driver (drain timeout, Ctrl-C) marks the exchange ``cancelled`` and
re-raises, so the caller can record it and unwind.

``request_timeout_s`` bounds the whole request: besides the gevent timer (which fires while the greenlet waits on
the socket), the read loop checks the clock after every line, so a server that streams without pause (endless
events or ``:`` comments) cannot keep a request past it; ``stream_idle_timeout_s`` still applies between reads.
Lines are capped (:mod:`harness.load.lines`): a line without end is a ``malformed_stream`` at the cap.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlsplit

import gevent
from geventhttpclient import HTTPClient
from geventhttpclient.response import HTTPConnectionClosed, HTTPParseError

from harness.core.net.caps import ERROR_BODY_MAX_BYTES
from harness.load.lines import LineSplitter, LineTooLong, read_line
from harness.load.sse import SseDecoder, StreamState, excerpt

MAX_ERROR_BODY = ERROR_BODY_MAX_BYTES
DRAIN_AFTER_DONE_S = 1.0


class Interrupted(BaseException):
    """Raised inside a request greenlet to stop it (drain timeout, Ctrl-C, server gone)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class Exchange:
    """One request's client-side observations."""

    api: str
    send_ns: int = 0
    first_byte_ns: int | None = None
    end_ns: int | None = None
    http_status: int | None = None
    state: StreamState | None = None

    def __post_init__(self) -> None:
        if self.state is None:
            self.state = StreamState()

    @property
    def st(self) -> StreamState:
        """The stream state (always present)."""
        assert self.state is not None
        return self.state

    def fail(self, kind: str, detail: str) -> None:
        """Record an error (the first one wins)."""
        if self.st.error_kind is None:
            self.st.error_kind = kind
            self.st.error_detail = detail[:300]

    def interrupted(self, reason: str) -> None:
        """Mark a request the driver stopped."""
        self.fail("cancelled", reason)
        if self.end_ns is None:
            self.end_ns = time.perf_counter_ns()


class StreamClient(Protocol):
    """A keep-alive client that sends streaming POSTs."""

    def post_stream(self, path: str, body: bytes, ex: Exchange) -> None:
        """Send ``body`` to ``path`` and read the SSE stream into ``ex``."""

    def close(self) -> None:
        """Close connections."""


@dataclass(frozen=True)
class Timeouts:
    """Request limits: whole request, silence inside a stream, connect."""

    request_s: float
    idle_s: float
    connect_s: float = 10.0


def _transport_failure(ex: Exchange, exc: BaseException) -> None:
    """A broken connection: ``incomplete`` once the response had begun, ``connection`` before."""
    kind = "incomplete" if ex.first_byte_ns is not None else "connection"
    ex.fail(kind, f"{type(exc).__name__}: {exc}")


def _timed_out(ex: Exchange, request_s: float) -> None:
    ex.fail("timeout", f"no complete response within request_timeout_s={request_s:g}")


def _status_kind(status: int) -> str:
    return "http_5xx" if status >= 500 else "http_4xx"


class GeventStreamClient:
    """``geventhttpclient`` backend (``concurrency`` keep-alive connections)."""

    def __init__(self, base_url: str, timeouts: Timeouts, concurrency: int = 1) -> None:
        parts = urlsplit(base_url)
        self._prefix = parts.path.rstrip("/")
        self._t = timeouts
        self._client = HTTPClient(parts.hostname or "127.0.0.1", port=parts.port,
                                  ssl=parts.scheme == "https", concurrency=concurrency,
                                  connection_timeout=min(timeouts.connect_s, timeouts.request_s),
                                  network_timeout=timeouts.idle_s, block_size=16384)
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}

    def post_stream(self, path: str, body: bytes, ex: Exchange) -> None:
        """Send and read one streaming request (see the module docstring for the error kinds)."""
        limit = gevent.Timeout(self._t.request_s)
        limit.start()
        decoder = SseDecoder(ex.api)
        ex.state = decoder.state
        resp = None
        try:
            ex.send_ns = time.perf_counter_ns()
            resp = self._client.request("POST", self._prefix + path, body=body, headers=self._headers)
            ex.first_byte_ns = time.perf_counter_ns()
            ex.http_status = resp.status_code
            ctype = str(resp.get("content-type") or "")
            if ex.http_status >= 400:
                text = resp.read(MAX_ERROR_BODY)
                ex.fail(_status_kind(ex.http_status), f"HTTP {ex.http_status}: {excerpt(text)}")
            elif "text/event-stream" not in ctype:
                text = resp.read(MAX_ERROR_BODY)
                ex.fail("malformed_stream", f"expected text/event-stream, got {ctype or 'no content type'}: "
                                            f"{excerpt(text)}")
            else:
                self._read_stream(resp, decoder, ex, ex.send_ns + int(self._t.request_s * 1e9))
        except gevent.Timeout as exc:
            if exc is not limit:
                raise
            _timed_out(ex, self._t.request_s)
        except LineTooLong as exc:
            ex.fail("malformed_stream", str(exc))
        except TimeoutError:
            where = "stream" if ex.first_byte_ns is not None else "response headers"
            ex.fail("stalled", f"no data for stream_idle_timeout_s={self._t.idle_s:g} (waiting for {where})")
        except (HTTPConnectionClosed, HTTPParseError, OSError) as exc:
            _transport_failure(ex, exc)
        except (Interrupted, gevent.GreenletExit) as exc:
            ex.interrupted(exc.reason if isinstance(exc, Interrupted) else "stopped")
            raise
        finally:
            limit.close()
            if ex.end_ns is None:
                ex.end_ns = time.perf_counter_ns()
            if resp is not None:
                resp.release()

    def _read_stream(self, resp: object, decoder: SseDecoder, ex: Exchange, deadline_ns: int) -> None:
        clock = time.perf_counter_ns
        while True:
            line = read_line(resp)
            now = clock()
            if not line:
                decoder.finish()
                ex.end_ns = now
                return
            if decoder.feed_line(line, now):
                ex.end_ns = now
                break
            if now > deadline_ns:  # a stream without pause never lets the gevent timer fire
                _timed_out(ex, self._t.request_s)
                ex.end_ns = now
                return
        if decoder.state.done:  # read the chunked terminator so the connection can be reused
            with gevent.Timeout(DRAIN_AFTER_DONE_S, False):
                for _ in range(64):
                    if not read_line(resp):
                        break

    def close(self) -> None:
        """Close all connections."""
        self._client.close()


class HttpxStreamClient:
    """``httpx`` backend (for comparison; needs gevent-patched sockets for the request limit to work)."""

    def __init__(self, base_url: str, timeouts: Timeouts, concurrency: int = 1) -> None:
        import httpx

        self._httpx = httpx
        self._base = base_url.rstrip("/")
        self._t = timeouts
        self._client = httpx.Client(timeout=httpx.Timeout(connect=timeouts.connect_s, read=timeouts.idle_s,
                                                          write=timeouts.idle_s, pool=timeouts.request_s),
                                    limits=httpx.Limits(max_connections=max(concurrency, 1)),
                                    headers={"Content-Type": "application/json", "Accept": "text/event-stream"})

    def post_stream(self, path: str, body: bytes, ex: Exchange) -> None:
        """Send and read one streaming request."""
        httpx = self._httpx
        limit = gevent.Timeout(self._t.request_s)
        limit.start()
        decoder = SseDecoder(ex.api)
        ex.state = decoder.state
        try:
            ex.send_ns = time.perf_counter_ns()
            with self._client.stream("POST", self._base + path, content=body) as resp:
                ex.first_byte_ns = time.perf_counter_ns()
                ex.http_status = resp.status_code
                ctype = resp.headers.get("content-type", "")
                if resp.status_code >= 400:
                    text = next(resp.iter_raw(MAX_ERROR_BODY), b"")
                    ex.fail(_status_kind(resp.status_code), f"HTTP {resp.status_code}: {excerpt(text)}")
                elif "text/event-stream" not in ctype:
                    ex.fail("malformed_stream", f"expected text/event-stream, got {ctype or 'no content type'}")
                else:
                    self._read_stream(resp.iter_raw(), decoder, ex, ex.send_ns + int(self._t.request_s * 1e9),
                                      self._t.request_s)
        except gevent.Timeout as exc:
            if exc is not limit:
                raise
            _timed_out(ex, self._t.request_s)
        except LineTooLong as exc:
            ex.fail("malformed_stream", str(exc))
        except (httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout):
            ex.fail("stalled", f"no data for stream_idle_timeout_s={self._t.idle_s:g}")
        except httpx.HTTPError as exc:
            _transport_failure(ex, exc)
        except (Interrupted, gevent.GreenletExit) as exc:
            ex.interrupted(exc.reason if isinstance(exc, Interrupted) else "stopped")
            raise
        finally:
            limit.close()
            if ex.end_ns is None:
                ex.end_ns = time.perf_counter_ns()

    @staticmethod
    def _read_stream(chunks: object, decoder: SseDecoder, ex: Exchange, deadline_ns: int, request_s: float) -> None:
        clock = time.perf_counter_ns
        lines = LineSplitter()
        for chunk in chunks:  # type: ignore[attr-defined]
            now = clock()
            for line in lines.feed(chunk):
                if decoder.feed_line(line, now):
                    ex.end_ns = now
                    return
            if now > deadline_ns:
                _timed_out(ex, request_s)
                ex.end_ns = now
                return
        now = clock()
        if lines.rest():
            decoder.feed_line(lines.rest(), now)
        decoder.finish()
        ex.end_ns = now

    def close(self) -> None:
        """Close all connections."""
        self._client.close()


CLIENTS: dict[str, Callable[[str, Timeouts, int], StreamClient]] = {"gevent": GeventStreamClient,
                                                                     "httpx": HttpxStreamClient}


def make_client(kind: str, base_url: str, timeouts: Timeouts, concurrency: int = 1) -> StreamClient:
    """A client of the named backend."""
    try:
        factory = CLIENTS[kind]
    except KeyError:
        raise ValueError(f"unknown client {kind!r}; choose one of {', '.join(CLIENTS)}") from None
    client: StreamClient = factory(base_url, timeouts, concurrency)
    return client
