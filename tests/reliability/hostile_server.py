"""A hostile HTTP server on 127.0.0.1 for the network hardening tests (imported as ``hostile_server``).

One asyncio server in a thread, started per test on a free port and stopped at the end. ``fault`` picks how it
misbehaves; every connection is cut after :data:`MAX_CONN_S` at the latest, so nothing it does outlives a test:

- ``slowloris``: the status line, then one header byte per second, never the end of the headers.
- ``drip``: prompt headers, then the body one byte every 2 s (``/v1/models`` JSON, ``/metrics`` text).
- ``gzip_bomb``: ``/v1/models`` and ``/metrics`` answer ~3 MB of gzip that inflate to ~3 GiB of zeros.
- ``sse_endless`` / ``sse_comments`` / ``sse_longline``: a proper ``/v1/models`` (model ``m``) and non-streamed
  answers, but every stream is endless ``data:`` events, endless ``:`` comments, or one 512 MiB line with no
  newline (generated on the fly).
- ``escapes``: ``/v1/models`` lists a model id carrying terminal escape sequences; errors elsewhere carry them too.

Request headers are kept in :attr:`HostileServer.seen_headers` (lower-case names, and the path as ``:path``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import zlib
from collections.abc import Iterator
from functools import cache

MAX_CONN_S = 60.0
ESCAPES = "\x1b]0;pwned\x07\x1b[2J\x1b[31mevil"
LONG_LINE_BYTES = 512 << 20
_MODELS = json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode()
_CHUNK = b'data: {"id":"x","choices":[{"index":0,"delta":{"content":"a"},"text":"a"}]}\n\n'


@cache
def gzip_bomb(compressed_bytes: int = 3 << 20) -> bytes:
    """A gzip body of about ``compressed_bytes`` that inflates ~1000x (zeros; made fast by repeating one
    byte-aligned deflate block; the trailer's CRC is not that of the data, which only a reader that got to the
    end would notice)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(1 << 20)
    head = comp.compress(zeros) + comp.flush(zlib.Z_FULL_FLUSH)
    block = comp.compress(zeros) + comp.flush(zlib.Z_FULL_FLUSH)
    return head + block * max(1, compressed_bytes // len(block)) + comp.flush()


class HostileServer:
    """``with HostileServer("drip") as srv: srv.url``."""

    def __init__(self, fault: str) -> None:
        self.fault = fault
        self.seen_headers: list[dict[str, str]] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> HostileServer:
        if self.fault == "gzip_bomb":
            gzip_bomb()
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("hostile server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._shutdown)
        self._thread.join(10)

    def _shutdown(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._server is not None:
            self._server.close()
        self._loop.call_later(0.2, self._loop.stop)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            self._server = await asyncio.start_server(self._conn, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]
            self._ready.set()

        self._loop.run_until_complete(start())
        self._loop.run_forever()
        self._loop.close()

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # type: ignore[arg-type]
        try:
            async with asyncio.timeout(MAX_CONN_S):
                for _ in range(100):  # keep-alive: a bounded number of requests per connection
                    if not await self._one(reader, writer):
                        break
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)  # type: ignore[arg-type]
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path = lines[0].split(" ")[:2]
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        self.seen_headers.append({**headers, ":path": path})
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        stream = b'"stream":true' in body.replace(b" ", b"")
        await self._answer(writer, method, path.split("?")[0], stream)
        return True

    async def _answer(self, w: asyncio.StreamWriter, method: str, path: str, stream: bool) -> None:
        fault = self.fault
        metrics = path == "/metrics"
        if fault == "slowloris":
            w.write(b"HTTP/1.1 200 OK\r\n")
            for _ in range(int(MAX_CONN_S)):
                w.write(b"X")
                await w.drain()
                await asyncio.sleep(1.0)
            return
        if fault == "drip" and (metrics or path == "/v1/models"):
            body = b"# HELP x y\n# TYPE x counter\nx 1\n" if metrics else _MODELS
            w.write(b"HTTP/1.1 200 OK\r\nContent-Type: " + (b"text/plain" if metrics else b"application/json") +
                    b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n")
            for i in range(len(body)):
                w.write(body[i:i + 1])
                await w.drain()
                await asyncio.sleep(2.0)
            return
        if fault == "gzip_bomb" and (metrics or path == "/v1/models"):
            bomb = gzip_bomb()
            w.write(b"HTTP/1.1 200 OK\r\nContent-Type: " + (b"text/plain" if metrics else b"application/json") +
                    b"\r\nContent-Encoding: gzip\r\nContent-Length: " + str(len(bomb)).encode() + b"\r\n\r\n")
            w.write(bomb)
            await w.drain()
            return
        if path == "/v1/models":
            models = _MODELS
            if fault == "escapes":
                models = json.dumps({"object": "list", "data": [{"id": ESCAPES, "object": "model"}]}).encode()
            self._json(w, 200, models)
            return
        if fault == "escapes" or not path.startswith("/v1/"):
            self._json(w, 500, json.dumps({"error": {"message": ESCAPES, "code": 500}}).encode())
            return
        if not stream:
            self._json(w, 200, json.dumps({"id": "x", "object": "chat.completion", "model": "m", "created": 0,
                                           "choices": [{"index": 0, "finish_reason": "stop", "text": "a",
                                                        "message": {"role": "assistant", "content": "a"}}],
                                           "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                                     "total_tokens": 2}}).encode())
            return
        w.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        if fault == "sse_longline":
            w.write(b"data: ")
            piece = b"a" * (1 << 20)
            for _ in range(LONG_LINE_BYTES // len(piece)):
                w.write(piece)
                await w.drain()
            return
        unit = _CHUNK * 64 if fault == "sse_endless" else b": keep-alive\n" * 256
        for _ in range(10_000_000):
            w.write(unit)
            await w.drain()

    @staticmethod
    def _json(w: asyncio.StreamWriter, status: int, body: bytes) -> None:
        w.write(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                .encode() + body)


@contextlib.contextmanager
def hostile(fault: str) -> Iterator[HostileServer]:
    """A started :class:`HostileServer`, stopped on exit."""
    with HostileServer(fault) as srv:
        yield srv
