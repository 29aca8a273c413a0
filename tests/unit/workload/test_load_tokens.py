"""Token calibration: /tokenize, then usage counts, then a recorded heuristic (loopback stub servers)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harness.workload.tokens import calibrate_tokenizer, server_root


def count(payload: dict[str, Any]) -> int:
    """A BPE-like tokenizer: BOS + two tokens per word; chat adds 3 per message and 2 for the reply."""
    if "messages" in payload:
        return 1 + sum(3 + 2 * len(m["content"].split()) for m in payload["messages"]) + 2
    return 1 + 2 * len(payload["prompt"].split())


def make_handler(tokenize: bool, usage: bool) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if self.path == "/tokenize" and tokenize:
                self.reply(200, {"count": count(payload), "max_model_len": 4096})
            elif self.path.startswith("/v1/") and usage:
                self.reply(200, {"choices": [], "usage": {"prompt_tokens": count(payload), "completion_tokens": 1}})
            else:
                self.reply(404, {"detail": "Not Found"})

        def reply(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def stub() -> Iterator[Callable[[bool, bool], str]]:
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(tokenize: bool, usage: bool) -> str:
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), make_handler(tokenize, usage))
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}/v1"

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def test_tokenize_endpoint(stub: Callable[[bool, bool], str]) -> None:
    cal = calibrate_tokenizer(stub(True, True), "m", 5.0)
    assert cal.method == "tokenize" and cal.tokens_per_word == 2.0
    assert (cal.completion_overhead, cal.chat_overhead, cal.chat_message_overhead) == (1, 6, 3)
    assert cal.max_model_len == 4096
    assert cal.words_for(1001) == 500 and cal.overhead("chat", 3) == 12


def test_usage_fallback(stub: Callable[[bool, bool], str]) -> None:
    cal = calibrate_tokenizer(stub(False, True), "m", 5.0)
    assert cal.method == "usage" and cal.tokens_per_word == 2.0 and cal.chat_overhead == 6
    assert "no /tokenize" in (cal.note or "")


def test_heuristic_when_nothing_answers(stub: Callable[[bool, bool], str]) -> None:
    cal = calibrate_tokenizer(stub(False, False), "m", 5.0)
    assert cal.method == "heuristic" and cal.tokens_per_word == 1.3
    assert "404" in (cal.note or "")


def test_server_root() -> None:
    assert server_root("http://h:1/v1/") == "http://h:1"
    assert server_root("http://h:1") == "http://h:1"
