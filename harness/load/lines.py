"""Bounded line reading of a streamed response body for the load client.

``geventhttpclient``'s own ``readline`` rescans its whole buffer from the start after every read, so a line with
no newline costs quadratic CPU (a 512 MiB line pins a core far past any timeout), and it grows without a cap.
:func:`read_line` scans each byte once and refuses a line longer than ``max_line`` bytes
(:data:`~harness.core.net.caps.SSE_LINE_MAX_BYTES` by default): the request ends as a malformed stream at the cap.
:class:`LineSplitter` does the same for a backend that hands over chunks (httpx).
"""

from __future__ import annotations

from typing import Any

from geventhttpclient.response import HTTPConnectionClosed

from harness.core.net.caps import SSE_LINE_MAX_BYTES


class LineTooLong(ValueError):
    """A stream line exceeded the cap without a newline."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"SSE line too long (> {limit} bytes without a newline)")
        self.limit = limit


def read_line(resp: Any, max_line: int = SSE_LINE_MAX_BYTES) -> bytes:
    """The next line (with its ``\\n``) of a ``geventhttpclient`` response; ``b""`` at the end of the body.

    Works on the response's parsed body buffer like the library's ``readline(b"\\n")`` (a partial last line at the
    end of the body is dropped, as there), but remembers how far it has looked."""
    buf: bytearray = resp._body_buffer
    cursor = 0
    while True:
        index = buf.find(b"\n", cursor)
        if index >= 0:
            line = bytes(buf[:index + 1])
            del buf[:index + 1]
            return line
        cursor = len(buf)
        if cursor > max_line:
            raise LineTooLong(max_line)
        if resp.message_complete:
            return b""
        sock = resp._sock
        if sock is None:
            raise HTTPConnectionClosed("connection closed.")
        try:
            resp.feed(sock.recv(resp.block_size))
        except BaseException:
            resp.release()
            raise


class LineSplitter:
    """Chunks in, whole lines out (without their ``\\n``), refusing a line longer than ``max_line``."""

    __slots__ = ("_max", "_pending")

    def __init__(self, max_line: int = SSE_LINE_MAX_BYTES) -> None:
        self._pending = b""
        self._max = max_line

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines completed by ``chunk``."""
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        if len(self._pending) > self._max or any(len(line) > self._max for line in lines):
            raise LineTooLong(self._max)
        return lines

    def rest(self) -> bytes:
        """What is left after the last newline."""
        return self._pending
