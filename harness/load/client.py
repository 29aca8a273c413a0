"""Streaming HTTP clients for the load generator (gevent): one request in, one :class:`Exchange` out.

Two backends with one interface, chosen by ``StepRun.client``:

- ``gevent`` (default): ``geventhttpclient``, the C-parser HTTP client locust's ``FastHttpUser`` uses. Lines
  are read straight off the parsed body buffer. Each line gets two ``perf_counter_ns`` times: when its bytes
  arrived (the kernel's receive time of the read that brought them where Linux gives one, else when that read
  returned: :mod:`harness.load.lines`) and when the parser got to it. Response headers, chunks and the first token
  are timed by arrival; the first token's parse time is kept too (the client's own delay is the difference).
- ``httpx``: ``httpx`` over gevent-patched sockets, kept for comparison (``python -m tools.bench.load``
  measures both; httpx costs several times more client CPU per token). Its times are those of each chunk's
  arrival in user space (``readable``).

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
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import gevent
import gevent.socket
from geventhttpclient import HTTPClient
from geventhttpclient.connectionpool import ConnectionPool
from geventhttpclient.response import HTTPConnectionClosed, HTTPParseError

from harness.core.net.caps import ERROR_BODY_MAX_BYTES
from harness.load.lines import BodyLines, LineSplitter, LineTooLong, StampedSocket
from harness.load.sse import READABLE, SseDecoder, StreamState, excerpt
from harness.rundir.records import ErrorKind

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

    def fail(self, kind: ErrorKind, detail: str) -> None:
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
    kind: ErrorKind = "incomplete" if ex.first_byte_ns is not None else "connection"
    ex.fail(kind, f"{type(exc).__name__}: {exc}")


def _timed_out(ex: Exchange, request_s: float) -> None:
    ex.fail("timeout", f"no complete response within request_timeout_s={request_s:g}")


def _status_kind(status: int) -> ErrorKind:
    return "http_5xx" if status >= 500 else "http_4xx"


class StampedPool(ConnectionPool):
    """geventhttpclient's plain-TCP pool, making :class:`~harness.load.lines.StampedSocket` sockets (every read
    notes when its bytes arrived), and remembering which socket each greenlet took last: a response read whole with
    its headers gives its socket back before the client sees it."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._taken: weakref.WeakKeyDictionary[Any, gevent.socket.socket] = weakref.WeakKeyDictionary()

    def _create_tcp_socket(self, family: int, socktype: int, protocol: int) -> gevent.socket.socket:
        return StampedSocket(family, socktype, protocol)

    def get_socket(self) -> gevent.socket.socket:
        """A socket from the pool (see geventhttpclient), remembered as the calling greenlet's."""
        sock = super().get_socket()
        self._taken[gevent.getcurrent()] = sock
        return sock

    def taken(self) -> gevent.socket.socket | None:
        """The socket the calling greenlet took last (None: none)."""
        return self._taken.get(gevent.getcurrent())


class GeventStreamClient:
    """``geventhttpclient`` backend (``concurrency`` keep-alive connections; plain TCP ones timed at arrival)."""

    def __init__(self, base_url: str, timeouts: Timeouts, concurrency: int = 1) -> None:
        parts = urlsplit(base_url)
        self._prefix = parts.path.rstrip("/")
        self._t = timeouts
        host, connect_s = parts.hostname or "127.0.0.1", min(timeouts.connect_s, timeouts.request_s)
        self._client = HTTPClient(host, port=parts.port, ssl=parts.scheme == "https", concurrency=concurrency,
                                  connection_timeout=connect_s, network_timeout=timeouts.idle_s, block_size=16384)
        self._pool: StampedPool | None = None
        if not self._client.ssl:  # TLS sockets read through their own object: their lines are timed on return
            port = self._client.port or 80
            self._pool = StampedPool(host, port, host, port, size=concurrency, connection_timeout=connect_s,
                                     network_timeout=timeouts.idle_s)
            self._client._connection_pool = self._pool
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
            lines = BodyLines(resp, time.perf_counter_ns(), self._pool.taken() if self._pool is not None else None)
            ex.first_byte_ns = lines.wire_ns
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
                self._read_stream(lines, decoder, ex, ex.send_ns + int(self._t.request_s * 1e9))
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

    def _read_stream(self, lines: BodyLines, decoder: SseDecoder, ex: Exchange, deadline_ns: int) -> None:
        clock = time.perf_counter_ns
        read, feed = lines.read, decoder.feed_line
        while True:
            line = read()
            now = clock()
            if not line:
                decoder.finish()
                ex.end_ns = now
                return
            if feed(line, now, lines.wire_ns, lines.source):
                ex.end_ns = now
                break
            if now > deadline_ns:  # a stream without pause never lets the gevent timer fire
                _timed_out(ex, self._t.request_s)
                ex.end_ns = now
                return
        if decoder.state.done:  # read the chunked terminator so the connection can be reused
            with gevent.Timeout(DRAIN_AFTER_DONE_S, False):
                for _ in range(64):
                    if not read():
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
                if decoder.feed_line(line, now, now, READABLE):
                    ex.end_ns = now
                    return
            if now > deadline_ns:
                _timed_out(ex, request_s)
                ex.end_ns = now
                return
        now = clock()
        if lines.rest():
            decoder.feed_line(lines.rest(), now, now, READABLE)
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
