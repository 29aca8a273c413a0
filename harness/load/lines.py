"""Bounded line reading of a streamed response body for the load client, and when each line's bytes arrived.

``geventhttpclient``'s own ``readline`` rescans its whole buffer from the start after every read, so a line with
no newline costs quadratic CPU (a 512 MiB line pins a core far past any timeout), and it grows without a cap.
:class:`BodyLines` scans each byte once and refuses a line longer than ``max_line`` bytes
(:data:`~harness.core.net.caps.SSE_LINE_MAX_BYTES` by default): the request ends as a malformed stream at the cap.
:class:`LineSplitter` does the same for a backend that hands over chunks (httpx).

**Wire times.** A line's arrival is not when the parser gets to it: a busy client (other streams' events, records,
planning, a core shared with other work) leaves bytes in the socket buffer for milliseconds. Each read of a
:class:`StampedSocket` (the sockets the gevent client's pool makes) remembers when its bytes arrived, and
:attr:`BodyLines.wire_ns` is that time for the read that completed the current line:

- ``kernel``: the kernel's receive time (``SO_TIMESTAMPNS`` ancillary data of ``recvmsg``, Linux). For TCP, Linux
  gives one stamp per read: that of the newest segment it copied, and segments that queue up unread are merged,
  keeping the newest stamp. A line that waited in the buffer while a later one arrived is therefore stamped with the
  later arrival (never earlier than its own, never later than the read). The stamp is ``CLOCK_REALTIME``; it is
  converted to ``perf_counter_ns`` (``CLOCK_MONOTONIC``) with an offset sampled between two monotonic readings at
  most :data:`OFFSET_REFRESH_NS` apart (NTP slews both clocks alike; only a step of the wall clock moves the offset,
  and a converted stamp outside ``[read - MAX_WIRE_AGE_NS, read]`` is not used);
- ``readable``: the time the read returned (no kernel stamp: not Linux, TLS, or a read the kernel did not stamp,
  such as the first ones after timestamping was switched on host-wide, which importing this module does early).
"""

from __future__ import annotations

import platform
import socket
import struct
import sys
import time
from typing import Any

import gevent.socket
from geventhttpclient.response import HTTPConnectionClosed

from harness.core.net.caps import SSE_LINE_MAX_BYTES
from harness.load.sse import KERNEL, READABLE

# SO_TIMESTAMPNS (SO_TIMESTAMPNS_OLD) in asm-generic/socket.h, shared by these architectures (parisc, sparc, alpha
# and mips number it differently); with a 64-bit ``long`` the stamp is a ``struct timespec`` of two longs.
SO_TIMESTAMPNS = 35
_GENERIC_ARCHES = frozenset({"x86_64", "amd64", "aarch64", "arm64", "ppc64le", "ppc64", "s390x", "riscv64"})
_TIMESPEC = struct.Struct("@ll")
_TIMESPEC_SIZE = _TIMESPEC.size
_unpack_timespec = _TIMESPEC.unpack_from
_SOL_SOCKET = socket.SOL_SOCKET
_ANC_SPACE = socket.CMSG_SPACE(_TIMESPEC.size)
OFFSET_REFRESH_NS = 1_000_000_000
MAX_WIRE_AGE_NS = 60 * 1_000_000_000
CLOCK_SLACK_NS = 50_000  # a converted stamp this much after the read that returned it is still taken (as the read)
OFFSET_TRIES = 5


def kernel_stamps_supported() -> bool:
    """True where the kernel's receive times can be asked for (Linux, an architecture with the generic number)."""
    return (sys.platform.startswith("linux") and platform.machine().lower() in _GENERIC_ARCHES
            and struct.calcsize("l") == 8 and hasattr(socket.socket, "recvmsg"))


KERNEL_STAMPS = kernel_stamps_supported()


def _hold_stamping_on() -> socket.socket | None:
    """A socket that asks for receive times and stays open: Linux switches receive timestamping on for the whole host
    when the first socket asks for it, lazily (a deferred kernel work item), and off when the last one closes, so the
    first reads of a new socket would carry no stamp. Held from import (the runner's start), it is on for every step."""
    if not KERNEL_STAMPS:
        return None
    try:
        holder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    except OSError:
        return None
    try:
        holder.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        holder.close()
        return None
    return holder


_STAMPING_ON = _hold_stamping_on()


class RealtimeToPerf:
    """Converts ``CLOCK_REALTIME`` nanoseconds (kernel socket stamps) to ``perf_counter_ns`` readings.

    The offset between the clocks (:attr:`offset_ns`, realtime minus monotonic) is sampled as ``time_ns()`` between
    two ``perf_counter_ns()`` readings, the tightest of :data:`OFFSET_TRIES` pairs (its error is half their gap, well
    under a microsecond), and sampled again once it is :data:`OFFSET_REFRESH_NS` old or a conversion falls outside
    what is possible."""

    __slots__ = ("due_ns", "offset_ns", "refresh_ns")

    def __init__(self, refresh_ns: int = OFFSET_REFRESH_NS) -> None:
        self.refresh_ns = refresh_ns
        self.offset_ns = 0
        self.due_ns = -1  # perf_counter_ns reading from which the offset must be sampled again (-1: now)

    @staticmethod
    def sample(tries: int = OFFSET_TRIES) -> int:
        """``CLOCK_REALTIME - CLOCK_MONOTONIC`` now, in nanoseconds."""
        best_gap, best = -1, 0
        for _ in range(max(1, tries)):
            before = time.perf_counter_ns()
            real = time.time_ns()
            after = time.perf_counter_ns()
            if best_gap < 0 or after - before < best_gap:
                best_gap, best = after - before, real - (before + after) // 2
        return best

    def to_perf(self, real_ns: int, now_ns: int) -> int | None:
        """``real_ns`` as a ``perf_counter_ns`` reading, given the reading ``now_ns`` taken after it; None when it
        cannot be right (later than ``now_ns`` or older than :data:`MAX_WIRE_AGE_NS`: the wall clock was stepped)."""
        if now_ns >= self.due_ns:  # the offset is due (or was never sampled: due_ns is -1)
            self.offset_ns = self.sample()
            self.due_ns = now_ns + self.refresh_ns
        wire = real_ns - self.offset_ns
        if wire > now_ns + CLOCK_SLACK_NS or now_ns - wire > MAX_WIRE_AGE_NS:
            self.due_ns = -1  # sample again next time
            return None
        return min(wire, now_ns)


CLOCK = RealtimeToPerf()


def kernel_stamp(ancdata: list[tuple[int, int, bytes]], now_ns: int) -> int | None:
    """The kernel receive time in ``recvmsg`` ancillary data, as a ``perf_counter_ns`` reading (None: none)."""
    for level, kind, payload in ancdata:
        if kind == SO_TIMESTAMPNS and level == _SOL_SOCKET and len(payload) >= _TIMESPEC_SIZE:
            sec, nsec = _unpack_timespec(payload)
            return CLOCK.to_perf(sec * 1_000_000_000 + nsec, now_ns) if sec or nsec else None
    return None


class StampedSocket(gevent.socket.socket):  # type: ignore[misc]  # gevent ships no type hints
    """A gevent TCP socket whose every read remembers when its bytes arrived (:attr:`wire_ns`, a
    ``perf_counter_ns`` reading, and :attr:`wire_source`, ``kernel`` or ``readable``; see the module docstring)."""

    def __init__(self, family: int = -1, type: int = -1, proto: int = -1,  # socket's own parameter names
                 fileno: int | None = None) -> None:
        super().__init__(family, type, proto, fileno)
        self.wire_ns = 0
        self.wire_source = READABLE
        self.kernel = False
        if KERNEL_STAMPS:
            try:
                self.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                self.kernel = True
            except OSError:
                self.kernel = False

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        """``socket.recv`` (waiting on the gevent hub), noting when the bytes arrived."""
        if not self.kernel:
            data: bytes = super().recv(bufsize, flags)
            self.wire_ns, self.wire_source = time.perf_counter_ns(), READABLE
            return data
        data, ancdata, _flags, _addr = self.recvmsg(bufsize, _ANC_SPACE, flags)
        now = time.perf_counter_ns()
        wire = kernel_stamp(ancdata, now) if ancdata else None
        if wire is None:
            self.wire_ns, self.wire_source = now, READABLE
        else:
            self.wire_ns, self.wire_source = wire, KERNEL
        return bytes(data)


class LineTooLong(ValueError):
    """A stream line exceeded the cap without a newline."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"SSE line too long (> {limit} bytes without a newline)")
        self.limit = limit


class BodyLines:
    """The lines of a ``geventhttpclient`` response body, each with the time its last bytes arrived.

    :meth:`read` returns the next line (with its ``\\n``), ``b""`` at the end of the body; it works on the response's
    parsed body buffer like the library's ``readline(b"\\n")`` (a partial last line at the end of the body is dropped,
    as there), but remembers how far it has looked. After each call :attr:`wire_ns` / :attr:`source` describe the
    read that completed the line (the socket is read only when no whole line is buffered). ``headers_ns`` is when the
    response headers were parsed: the time of the lines that came with them when their socket has no stamp.
    ``sock`` is the socket the request went out on, for a response read whole with its headers (it has given its
    socket back already)."""

    __slots__ = ("_resp", "_stamped", "max_line", "source", "wire_ns")

    def __init__(self, resp: Any, headers_ns: int, sock: Any = None, max_line: int = SSE_LINE_MAX_BYTES) -> None:
        self._resp = resp
        self.max_line = max_line
        if resp._sock is not None:
            sock = resp._sock
        self._stamped = sock if isinstance(sock, StampedSocket) and sock.wire_ns else None
        if self._stamped is not None:
            self.wire_ns, self.source = min(self._stamped.wire_ns, headers_ns), self._stamped.wire_source
        else:
            self.wire_ns, self.source = headers_ns, READABLE

    def read(self) -> bytes:
        """The next line (see the class docstring)."""
        resp = self._resp
        buf: bytearray = resp._body_buffer
        cursor = 0
        while True:
            index = buf.find(b"\n", cursor)
            if index >= 0:
                line = bytes(buf[:index + 1])
                del buf[:index + 1]
                return line
            cursor = len(buf)
            if cursor > self.max_line:
                raise LineTooLong(self.max_line)
            if resp.message_complete:
                return b""
            sock = resp._sock
            if sock is None:
                raise HTTPConnectionClosed("connection closed.")
            try:
                data = sock.recv(resp.block_size)
                stamped = self._stamped
                if stamped is not None and sock is stamped:
                    self.wire_ns, self.source = stamped.wire_ns, stamped.wire_source
                else:
                    self.wire_ns, self.source = time.perf_counter_ns(), READABLE
                resp.feed(data)
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
