"""Arrival ("wire") times of the gevent client: a first token is timed when its bytes reached the socket (the kernel's
receive time on Linux), not when a busy client got round to parsing it; the parse time is kept beside it.

The SSE server runs in its own process (it shares no GIL with the client, whose loop a test holds on purpose) and
reports when each of its writes began and returned; every wait has a timeout and every busy loop a fixed length."""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import gevent
import gevent.select
import gevent.socket
import pytest

from harness.load import lines as wire
from harness.load.client import Exchange, Timeouts, make_client
from harness.load.lines import KERNEL_STAMPS, RealtimeToPerf, StampedSocket
from harness.load.sse import KERNEL, PARSED, READABLE, SseDecoder

needs_kernel_stamps = pytest.mark.skipif(not KERNEL_STAMPS, reason="no SO_TIMESTAMPNS on this platform")

HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
        b"connection: keep-alive\r\n\r\n")
SERVER_DELAY_S = 0.02  # the server answers this long after the request arrived
BUSY_S = 0.08  # the client's loop is held this long after the server's write (see _hold_the_loop)
GAP_S = 0.5  # the second token follows the first this much later: after the client is free again


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _sse(obj: object) -> bytes:
    return _chunk(b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n")


def _token(text: str) -> bytes:
    return _sse({"id": "cmpl-1", "choices": [{"index": 0, "text": text}]})


SERVER = r"""
import socket, sys, time
first, rest = bytes.fromhex(sys.argv[1]), bytes.fromhex(sys.argv[2])
gap_s, delay_s = float(sys.argv[3]), float(sys.argv[4])
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(1)
listener.settimeout(10.0)
print(listener.getsockname()[1], flush=True)
conn, _ = listener.accept()
conn.settimeout(10.0)
data = b""
while b"\r\n\r\n" not in data and len(data) < 1 << 16:
    got = conn.recv(65536)
    if not got:
        sys.exit(1)
    data += got
print("request", flush=True)
time.sleep(delay_s)
for part, pause in ((first, gap_s), (rest, 0.0)):
    began = time.perf_counter_ns()
    conn.sendall(part)
    print(began, time.perf_counter_ns(), flush=True)  # at once: a held client waits for this line
    time.sleep(pause)
conn.recv(1)
"""


class Server:
    """A one-request SSE server in its own process: ``SERVER_DELAY_S`` after the request it sends the headers with
    the first token, ``gap_s`` later the second token and the end, and reports when each write began and returned
    (``perf_counter_ns``: CLOCK_MONOTONIC, one clock for every process of the host)."""

    def __init__(self, gap_s: float) -> None:
        first, rest = HEAD + _token("a"), _token("b") + _sse(b"[DONE]") + b"0\r\n\r\n"
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER, first.hex(), rest.hex(), str(gap_s),
                                      str(SERVER_DELAY_S)], stdout=subprocess.PIPE)
        assert self.proc.stdout is not None
        self._fd, self._buf = self.proc.stdout.fileno(), b""
        self.requested = False
        self.writes: list[tuple[int, int]] = []
        port = self._line(30.0, select.select)
        assert port is not None, "the test server did not start"
        self.url = f"http://127.0.0.1:{int(port)}"

    def _line(self, timeout_s: float, wait: Callable[..., tuple[list[int], list[int], list[int]]]) -> str | None:
        """The server's next report line (unbuffered reads, so no line waits in a buffer select cannot see)."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not wait([self._fd], [], [], left)[0]:
                return None
            got = os.read(self._fd, 4096)
            if not got:
                return None
            self._buf += got
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode("ascii")

    def _note(self, line: str) -> None:
        if line == "request":
            self.requested = True
        else:
            began, returned = (int(v) for v in line.split())
            self.writes.append((began, returned))

    def wait_for_request(self, timeout_s: float = 10.0) -> bool:
        """Wait, letting other greenlets run (the client sends meanwhile), until the server has read the request."""
        while not self.requested:
            line = self._line(timeout_s, gevent.select.select)
            if line is None:
                return False
            self._note(line)
        return True

    def wait_for_write(self, k: int, timeout_s: float = 10.0) -> bool:
        """Block (the whole thread: a gevent hub calling this is held) until write ``k`` has returned, or the
        bounded wait ends; reads the write times reported so far."""
        deadline = time.monotonic() + timeout_s
        while len(self.writes) <= k:
            line = self._line(max(0.0, deadline - time.monotonic()), select.select)
            if line is None:
                return False
            self._note(line)
        return True

    def finish(self) -> None:
        """Read the remaining write times (bounded wait) and stop the server."""
        self.wait_for_write(1)
        self.stop()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def at_write(self, stamp: int | None, k: int) -> bool:
        """``stamp`` is the arrival of write ``k``: no earlier than the write began and within 1 ms of it (or before
        its ``sendall`` returned, should the server have been descheduled in between)."""
        began, returned = self.writes[k]
        return stamp is not None and began - 100_000 <= stamp <= max(returned, began + 1_000_000)


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    started: list[Server] = []

    def start(gap_s: float = GAP_S) -> Server:
        started.append(Server(gap_s))
        return started[-1]

    yield start
    for srv in started:
        srv.stop()


def _hold_the_loop(srv: Server, after_write: int, seconds: float) -> Callable[[], None]:
    """A greenlet body that lets the request go out, then holds the hub until the server has made write
    ``after_write`` and ``seconds`` more: the client is busy when those bytes arrive, however slowly a loaded host
    schedules either process (no fixed sleep decides the overlap)."""
    def hold() -> None:
        srv.wait_for_request()  # cooperative: the client greenlet sends the request meanwhile
        srv.wait_for_write(after_write)  # a blocking wait: the hub cannot run the client meanwhile
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:  # bounded busy loop: the client is "loaded"
            pass
    return hold


def _exchange(srv: Server, busy_s: float, hold_until_write: int = 0) -> Exchange:
    client = make_client("gevent", srv.url, Timeouts(request_s=5.0, idle_s=2.0, connect_s=2.0))
    ex = Exchange(api="completions")
    hog = gevent.spawn(_hold_the_loop(srv, hold_until_write, busy_s)) if busy_s else None
    try:
        client.post_stream("/v1/completions", b"{}", ex)
    finally:
        if hog is not None:
            hog.join(timeout=15.0)
        client.close()
        srv.finish()
    assert len(srv.writes) == 2
    return ex


@needs_kernel_stamps
def test_a_busy_client_times_the_first_token_at_its_arrival(serve: Callable[..., Server]) -> None:
    srv = serve()
    ex = _exchange(srv, BUSY_S)
    st = ex.st
    assert st.error_kind is None and st.done
    assert st.first_token_source == KERNEL
    assert st.first_token_ns is not None and st.first_token_parsed_ns is not None
    assert srv.at_write(st.first_token_ns, 0)  # within 1 ms of the server's send
    # the parser got to it only once the loop was free again: at least BUSY_S after the bytes arrived
    assert st.first_token_parsed_ns - st.first_token_ns >= BUSY_S * 1e9
    assert ex.first_byte_ns == st.first_token_ns == st.chunk_ns[0]  # headers and first token came together
    assert srv.at_write(st.chunk_ns[1], 1)  # the second token: read at once, also timed at arrival
    assert ex.send_ns <= st.first_token_ns <= st.first_token_parsed_ns <= (ex.end_ns or 0)


@needs_kernel_stamps
def test_a_first_token_left_unread_until_the_next_arrived_is_timed_no_earlier(serve: Callable[..., Server]) -> None:
    """The limit of TCP receive times: both writes arrive while the client is held, Linux merges them and keeps the
    newest time. The first token is then timed at the second's arrival: late, never earlier than it arrived."""
    srv = serve(gap_s=0.02)
    ex = _exchange(srv, BUSY_S, hold_until_write=1)  # held until both writes were made
    st = ex.st
    assert st.first_token_source == KERNEL and st.first_token_ns is not None
    assert srv.at_write(st.first_token_ns, 1)  # the newest segment's arrival
    assert st.first_token_ns >= srv.writes[0][0] + 10_000_000 and st.chunk_ns == [st.first_token_ns] * 2
    assert st.first_token_ns <= (st.first_token_parsed_ns or 0)


@needs_kernel_stamps
def test_an_idle_client_parses_right_after_arrival(serve: Callable[..., Server]) -> None:
    srv = serve()
    ex = _exchange(srv, 0.0)
    st = ex.st
    assert st.first_token_source == KERNEL and srv.at_write(st.first_token_ns, 0)
    assert st.first_token_ns is not None and 0 <= (st.first_token_parsed_ns or 0) - st.first_token_ns < 20_000_000


def test_without_kernel_stamps_the_read_time_is_used(serve: Callable[..., Server],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "KERNEL_STAMPS", False)
    ex = _exchange(serve(), 0.0)
    st = ex.st
    assert st.error_kind is None and st.first_token_source == READABLE
    assert st.first_token_ns is not None and st.first_token_ns <= (st.first_token_parsed_ns or 0)


@needs_kernel_stamps
def test_linux_stamps_a_tcp_read_with_its_newest_segment() -> None:
    """What Linux gives for TCP (documented in harness.load.lines): one receive time per read, that of the newest
    bytes it returns; segments that queued up unread are merged and keep the newest time."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        client = StampedSocket(socket.AF_INET, socket.SOCK_STREAM)
        client.settimeout(5.0)
        client.connect(listener.getsockname())
        peer, _ = listener.accept()
        with peer, client:
            for _ in range(100):  # harness.load.lines holds stamping on host-wide from import: at once, normally
                peer.sendall(b"w")
                client.recv(16)
                if client.wire_source == KERNEL:
                    break
                time.sleep(0.005)
            a_sent = time.perf_counter_ns()
            peer.sendall(b"a" * 200)
            time.sleep(0.02)
            b_sent = time.perf_counter_ns()
            peer.sendall(b"b" * 200)
            time.sleep(0.02)
            before_read = time.perf_counter_ns()
            data = client.recv(200)  # only the first segment's bytes
            assert data == b"a" * 200 and client.wire_source == KERNEL
            assert a_sent - 100_000 <= client.wire_ns <= before_read
            assert min(abs(client.wire_ns - a_sent), abs(client.wire_ns - b_sent)) < 2_000_000


def test_realtime_stamps_convert_to_the_monotonic_clock() -> None:
    clock = RealtimeToPerf()
    now = time.perf_counter_ns()
    converted = clock.to_perf(time.time_ns(), time.perf_counter_ns())
    assert converted is not None and abs(converted - now) < 1_000_000
    assert clock.to_perf(time.time_ns() + 10**9, time.perf_counter_ns()) is None  # from the future: a clock step
    assert clock.due_ns == -1  # ... so the offset is sampled again
    assert clock.to_perf(time.time_ns() - 120 * 10**9, time.perf_counter_ns()) is None  # older than any stamp
    assert clock.to_perf(time.time_ns() - 5_000_000, time.perf_counter_ns()) is not None


def test_the_offset_is_sampled_again_when_due(monkeypatch: pytest.MonkeyPatch) -> None:
    samples = iter([1000, 2000])
    monkeypatch.setattr(RealtimeToPerf, "sample", staticmethod(lambda tries=5: next(samples)))
    clock = RealtimeToPerf(refresh_ns=100)
    assert clock.to_perf(11_000, 10_000) == 10_000 and clock.offset_ns == 1000
    assert clock.to_perf(11_050, 10_050) == 10_050 and clock.offset_ns == 1000  # not due yet
    assert clock.to_perf(12_200, 10_200) == 10_200 and clock.offset_ns == 2000  # due: sampled again


def test_the_decoder_keeps_arrival_and_parse_times() -> None:
    dec = SseDecoder("completions")
    line = b'data: {"id": "c", "choices": [{"text": "x"}]}'
    assert not dec.feed_line(line, 500, 100, KERNEL)
    assert not dec.feed_line(b"", 510, 100, KERNEL)
    assert not dec.feed_line(line, 900, 800, READABLE)
    assert not dec.feed_line(b"", 905, 800, READABLE)
    st = dec.state
    assert (st.first_token_ns, st.first_token_parsed_ns, st.first_token_source) == (100, 500, KERNEL)
    assert st.chunk_ns == [100, 800] and st.last_event_ns == 900
    plain = SseDecoder("completions")
    plain.feed_line(line, 42)
    plain.feed_line(b"", 43)
    assert (plain.state.first_token_ns, plain.state.first_token_parsed_ns) == (42, 42)
    assert plain.state.first_token_source == PARSED


def test_sockets_of_the_pool_are_stamped() -> None:
    sock = StampedSocket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        assert isinstance(sock, gevent.socket.socket) and sock.kernel is KERNEL_STAMPS and sock.wire_ns == 0
    finally:
        sock.close()
