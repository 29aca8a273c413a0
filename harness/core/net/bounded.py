"""Whole-request deadlines and body caps for HTTP calls to servers the harness did not write.

httpx's timeouts are per phase (connect, each read): a server that drips one byte every 2 s, or sends its headers
a byte at a time (slow loris), never trips them. Here a request runs on asyncio under ``asyncio.timeout``, whose
cancellation really interrupts a read blocked anywhere (status line, headers or body). The body is decoded here,
not by httpx, layer by layer with a bounded output per step (``zlib`` with ``max_length``), and counted after
decompression: a gzip bomb is refused at the cap, with memory bounded by the cap. Responses of type
``text/event-stream`` also get a cap on the length of one line.

Sync callers use :func:`fetch` (a fresh event loop per call, about a millisecond), which also stops within
:data:`CANCEL_POLL_S` of a ``cancel`` event being set (Ctrl-C in a run sets one); async callers build a client
with :func:`capped_client` and call :func:`afetch` (or any httpx/openai call under their own deadline).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import ssl
import threading
import zlib
from collections.abc import AsyncIterator, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import httpx

from harness.core.net.caps import SSE_LINE_MAX_BYTES

CANCEL_POLL_S = 0.1
ACCEPT_ENCODING = "gzip, deflate"
_OUT_CHUNK = 64 << 10  # most bytes one decompression step may produce
T = TypeVar("T")


class FetchError(Exception):
    """A request that gave no usable answer; ``str()`` is the reason (``body too large (> N bytes)``, ...)."""


class FetchCancelled(FetchError):
    """The caller's cancel event was set while the request was in flight."""


class BodyTooLarge(httpx.DecodingError):
    """The server sent more than the cap allows (counted after decompression)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"body too large (> {limit} bytes)")
        self.limit = limit


class LineTooLong(BodyTooLarge):
    """An event stream sent a line longer than the cap without a newline."""

    def __init__(self, limit: int) -> None:
        httpx.DecodingError.__init__(self, f"line too long (> {limit} bytes without a newline)")
        self.limit = limit


def describe(exc: BaseException) -> str:
    """``Type: message`` (or just the type when the message is empty)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _decoder(encoding: str) -> Any:
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj(zlib.MAX_WBITS)
    raise httpx.DecodingError(f"unsupported content-encoding {encoding!r} (asked for {ACCEPT_ENCODING})")


def _inflate(layers: list[Any], data: bytes) -> Iterator[bytes]:
    """Undo ``layers`` (outermost first) on ``data``, in pieces of at most ``_OUT_CHUNK`` bytes each."""
    if not layers:
        if data:
            yield data
        return
    head, rest = layers[0], layers[1:]
    while data:
        try:
            out = head.decompress(data, _OUT_CHUNK)
        except zlib.error as exc:
            raise httpx.DecodingError(f"bad compressed body: {exc}") from None
        data = head.unconsumed_tail
        if out:
            yield from _inflate(rest, out)
        elif head.eof or not data:
            return  # bytes after the end of the compressed stream are ignored


class _CappedStream(httpx.AsyncByteStream):
    """The response body, decoded and counted; raises :class:`BodyTooLarge` / :class:`LineTooLong`."""

    def __init__(self, inner: httpx.AsyncByteStream, layers: list[Any], max_bytes: int,
                 max_line: int | None) -> None:
        self._inner, self._layers, self._max, self._max_line = inner, layers, max_bytes, max_line

    async def __aiter__(self) -> AsyncIterator[bytes]:
        total = since_newline = 0
        async for raw in self._inner:
            for piece in _inflate(self._layers, raw):
                total += len(piece)
                if total > self._max:
                    raise BodyTooLarge(self._max)
                if self._max_line is not None:
                    newline = piece.rfind(b"\n")
                    since_newline = since_newline + len(piece) if newline < 0 else len(piece) - newline - 1
                    if since_newline > self._max_line:
                        raise LineTooLong(self._max_line)
                yield piece

    async def aclose(self) -> None:
        await self._inner.aclose()


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    return httpx.create_ssl_context()  # made once: building one costs ~10 ms of CPU per client


class CappedTransport(httpx.AsyncBaseTransport):
    """An httpx transport whose response bodies are decoded here, capped at ``max_body_bytes`` decoded bytes."""

    def __init__(self, max_body_bytes: int, max_line_bytes: int = SSE_LINE_MAX_BYTES) -> None:
        self._inner = httpx.AsyncHTTPTransport(verify=_ssl_context(), retries=0, trust_env=False)
        self._max_body, self._max_line = max_body_bytes, max_line_bytes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.headers["Accept-Encoding"] = ACCEPT_ENCODING
        resp = await self._inner.handle_async_request(request)
        encodings = [e.strip().lower() for e in resp.headers.get("content-encoding", "").split(",") if e.strip()]
        try:
            layers = [d for d in (_decoder(e) for e in reversed(encodings)) if d is not None]
        except httpx.DecodingError:
            await resp.aclose()
            raise
        dropped = {b"content-encoding", b"content-length"} if encodings else set()
        headers = [(k, v) for k, v in resp.headers.raw if k.lower() not in dropped]
        sse = "text/event-stream" in resp.headers.get("content-type", "")
        stream = _CappedStream(cast(httpx.AsyncByteStream, resp.stream), layers, self._max_body,
                               self._max_line if sse else None)
        return httpx.Response(resp.status_code, headers=headers, stream=stream, extensions=resp.extensions)

    async def aclose(self) -> None:
        await self._inner.aclose()


def capped_client(max_body_bytes: int, *, timeout_s: float, max_line_bytes: int = SSE_LINE_MAX_BYTES,
                  headers: dict[str, str] | None = None) -> httpx.AsyncClient:
    """An async client with capped bodies, no redirects, no proxies from the environment, no retries."""
    return httpx.AsyncClient(transport=CappedTransport(max_body_bytes, max_line_bytes),
                             timeout=httpx.Timeout(timeout_s), headers=headers, follow_redirects=False,
                             trust_env=False)


@dataclass(frozen=True)
class Fetched:
    """A complete (capped) answer."""

    status: int
    content_type: str
    body: bytes
    charset: str | None = None

    def text(self) -> str:
        """The body as text (undecodable bytes replaced)."""
        try:
            return self.body.decode(self.charset or "utf-8", errors="replace")
        except LookupError:  # a charset Python does not know
            return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body parsed as JSON (raises ValueError)."""
        return json.loads(self.body)


async def afetch(client: httpx.AsyncClient, method: str, url: str, *, deadline_s: float,
                 json_body: Any = None) -> Fetched:
    """One whole request (headers and body) within ``deadline_s``; raises :class:`FetchError` with the reason."""
    try:
        async with asyncio.timeout(deadline_s):
            resp = await client.request(method, url, json=json_body)
    except TimeoutError:
        raise FetchError(f"Timeout: no complete answer within {deadline_s:g} s") from None
    except BodyTooLarge as exc:
        raise FetchError(str(exc)) from None
    except (httpx.HTTPError, httpx.InvalidURL, OSError, ValueError) as exc:
        raise FetchError(describe(exc)) from None
    return Fetched(resp.status_code, resp.headers.get("content-type", ""), resp.content, resp.charset_encoding)


def run_cancellable(coro: Coroutine[Any, Any, T], cancel: threading.Event | None) -> T:
    """Run ``coro`` on a fresh event loop; raise :class:`FetchCancelled` soon after ``cancel`` is set."""

    async def main() -> T:
        task = asyncio.ensure_future(coro)
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=CANCEL_POLL_S)
                if done:
                    return task.result()
                if cancel is not None and cancel.is_set():
                    raise FetchCancelled("interrupted")
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    return asyncio.run(main())


def fetch(method: str, url: str, *, deadline_s: float, max_body_bytes: int, json_body: Any = None,
          cancel: threading.Event | None = None) -> Fetched:
    """Sync :func:`afetch` on a fresh client; ``cancel`` ends it early (:class:`FetchCancelled`)."""

    async def one() -> Fetched:
        async with capped_client(max_body_bytes, timeout_s=deadline_s) as client:
            return await afetch(client, method, url, deadline_s=deadline_s, json_body=json_body)

    return run_cancellable(one(), cancel)
