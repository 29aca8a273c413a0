"""The streaming clients against a scripted loopback server: timings, every error kind, never a hang."""

from __future__ import annotations

import json
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator

import gevent
import pytest

from harness.load.client import Exchange, Interrupted, Timeouts, make_client

Script = Callable[[socket.socket], None]


def sse(obj: object) -> bytes:
    return b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n"


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
        b"connection: keep-alive\r\n\r\n")


def token(text: str) -> bytes:
    return chunk(sse({"id": "cmpl-7", "choices": [{"index": 0, "delta": {"content": text}}]}))


def good_stream(sock: socket.socket) -> None:
    sock.sendall(HEAD + token("a"))
    time.sleep(0.02)
    sock.sendall(token("b"))
    time.sleep(0.02)
    usage = {"prompt_tokens": 5, "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 3}}
    sock.sendall(chunk(sse({"id": "cmpl-7", "choices": [], "usage": usage})) + chunk(sse(b"[DONE]")) + b"0\r\n\r\n")


class _Handler(socketserver.BaseRequestHandler):
    script: Script

    def handle(self) -> None:
        sock: socket.socket = self.request
        for _ in range(8):  # keep-alive: several requests per connection, bounded
            data = b""
            while b"\r\n\r\n" not in data:
                got = sock.recv(65536)
                if not got:
                    return
                data += got
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length")))
            while len(body) < length:
                body += sock.recv(65536)
            try:
                self.server.script(sock)  # type: ignore[attr-defined]
            except OSError:
                return


@pytest.fixture
def server() -> Iterator[Callable[[Script], str]]:
    servers: list[socketserver.ThreadingTCPServer] = []

    def start(script: Script) -> str:
        srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Handler)
        srv.daemon_threads = True
        srv.script = script  # type: ignore[attr-defined]
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}"

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def run(url: str, kind: str = "gevent", request_s: float = 5.0, idle_s: float = 2.0) -> Exchange:
    client = make_client(kind, url, Timeouts(request_s=request_s, idle_s=idle_s, connect_s=2.0))
    ex = Exchange(api="chat")
    try:
        client.post_stream("/v1/chat/completions", b'{"x": 1}', ex)
    finally:
        client.close()
    return ex


@pytest.mark.parametrize("kind", ["gevent", "httpx"])
def test_good_stream_timings_and_usage(server: Callable[[Script], str], kind: str) -> None:
    ex = run(server(good_stream), kind)
    st = ex.st
    assert st.error_kind is None and st.done and ex.http_status == 200
    assert len(st.chunk_ns) == 2 and st.first_token_ns == st.chunk_ns[0]
    assert ex.send_ns <= (ex.first_byte_ns or 0) <= st.chunk_ns[0] < st.chunk_ns[1] <= (ex.end_ns or 0)
    assert 15e6 < st.chunk_ns[1] - st.chunk_ns[0] < 500e6  # the server's 20 ms gap is seen
    assert (st.prompt_tokens, st.completion_tokens, st.cached_tokens, st.response_id) == (5, 2, 3, "cmpl-7")


def test_keep_alive_connection_is_reused(server: Callable[[Script], str]) -> None:
    url = server(good_stream)
    client = make_client("gevent", url, Timeouts(request_s=5, idle_s=2))
    try:
        for _ in range(3):
            ex = Exchange(api="chat")
            client.post_stream("/v1/chat/completions", b"{}", ex)
            assert ex.st.error_kind is None
    finally:
        client.close()


@pytest.mark.parametrize("kind", ["gevent", "httpx"])
def test_stalled_stream_ends_within_the_idle_timeout(server: Callable[[Script], str], kind: str) -> None:
    def stall(sock: socket.socket) -> None:
        sock.sendall(HEAD + token("a"))
        time.sleep(3.0)

    t0 = time.monotonic()
    ex = run(server(stall), kind, idle_s=0.3)
    elapsed = time.monotonic() - t0
    assert ex.st.error_kind == "stalled", ex.st.error_detail
    assert len(ex.st.chunk_ns) == 1
    assert elapsed < 1.5


def test_whole_request_limit_is_a_timeout(server: Callable[[Script], str]) -> None:
    def trickle(sock: socket.socket) -> None:
        sock.sendall(HEAD)
        for _ in range(60):
            sock.sendall(token("x"))
            time.sleep(0.05)

    t0 = time.monotonic()
    ex = run(server(trickle), request_s=0.5, idle_s=2.0)
    assert ex.st.error_kind == "timeout"
    assert 0.4 < time.monotonic() - t0 < 1.5
    assert len(ex.st.chunk_ns) >= 3


def test_http_errors_and_wrong_content(server: Callable[[Script], str]) -> None:
    def fail(sock: socket.socket) -> None:
        body = b'{"error": {"message": "out of memory"}}'
        sock.sendall(b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
                     b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)

    ex = run(server(fail))
    assert (ex.st.error_kind, ex.http_status) == ("http_5xx", 503)
    assert "out of memory" in (ex.st.error_detail or "")

    def html(sock: socket.socket) -> None:
        body = b"<html>hello</html>"
        sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body)

    ex = run(server(html))
    assert ex.st.error_kind == "malformed_stream"
    assert "expected text/event-stream, got text/html" in (ex.st.error_detail or "")


def test_closed_mid_stream_is_incomplete(server: Callable[[Script], str]) -> None:
    def cut(sock: socket.socket) -> None:
        sock.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
                     + sse({"choices": [{"delta": {"content": "a"}}]}))
        sock.shutdown(socket.SHUT_RDWR)
        raise OSError("closed")

    ex = run(server(cut))
    assert ex.st.error_kind == "incomplete" and len(ex.st.chunk_ns) == 1


def test_malformed_stream_line(server: Callable[[Script], str]) -> None:
    def garbage(sock: socket.socket) -> None:
        sock.sendall(HEAD + token("a") + chunk(b"this is not sse\n\n") + b"0\r\n\r\n")

    ex = run(server(garbage))
    assert ex.st.error_kind == "malformed_stream"
    assert "this is not sse" in (ex.st.error_detail or "")


def test_connection_refused() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ex = run(f"http://127.0.0.1:{port}")
    assert ex.st.error_kind == "connection" and ex.http_status is None


def test_a_killed_request_is_marked_cancelled(server: Callable[[Script], str]) -> None:
    def slow(sock: socket.socket) -> None:
        sock.sendall(HEAD)
        time.sleep(2.0)

    client = make_client("gevent", server(slow), Timeouts(request_s=5, idle_s=5))
    ex = Exchange(api="chat")
    raised: list[BaseException] = []

    def request() -> None:
        try:
            client.post_stream("/v1/chat/completions", b"{}", ex)
        except Interrupted as exc:  # re-raised for the caller to unwind
            raised.append(exc)

    g = gevent.spawn(request)
    gevent.sleep(0.2)
    g.kill(Interrupted("drain timeout"), block=True, timeout=2)
    client.close()
    assert len(raised) == 1
    assert ex.st.error_kind == "cancelled" and ex.st.error_detail == "drain timeout"
    assert ex.end_ns is not None


def test_unknown_client_kind() -> None:
    with pytest.raises(ValueError, match="unknown client 'curl'"):
        make_client("curl", "http://127.0.0.1:1", Timeouts(1, 1))
