"""The Scraper against a real local HTTP server: polling, boundary scrapes, failures, drained JSON queues."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from harness.engines.spec import MetricsEndpoint
from harness.scrape.catalog import load_catalog
from harness.scrape.rawlog import read_raw_scrapes
from harness.scrape.samples import load_scrapes, step_server_stats
from harness.scrape.scraper import Scraper


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.hits = 0
        self.queue: list[dict[str, object]] = []
        self.iteration = 0
        self.reused = 0


class _Handler(BaseHTTPRequestHandler):
    state: _State

    def log_message(self, format: str, *args: object) -> None:  # quiet
        return

    def _send(self, code: int, body: bytes, ctype: str = "text/plain") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            return

    def do_GET(self) -> None:
        st = self.state
        if self.path == "/metrics":
            with st.lock:
                st.hits += 100
                body = (f"# TYPE vllm:prompt_tokens_cached_by_source_total counter\n"
                        f'vllm:prompt_tokens_cached_by_source_total{{source="device"}} {st.hits}\n')
            self._send(200, body.encode())
        elif self.path == "/iter":
            with st.lock:
                items, st.queue = st.queue, []
            self._send(200, json.dumps(items).encode(), "application/json")
        elif self.path == "/fail":
            self._send(500, b"engine exploded")
        elif self.path == "/slow":
            time.sleep(0.6)
            self._send(200, b"late 1\n")
        elif self.path == "/huge":
            self._send(200, b"x" * 5000)
        else:
            self._send(404, b"no")


@pytest.fixture
def server() -> Iterator[tuple[str, _State]]:
    state = _State()
    handler = type("Handler", (_Handler,), {"state": state})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_polls_and_boundary_scrapes_are_recorded(server: tuple[str, _State], tmp_path: Path) -> None:
    url, _state = server
    scraper = Scraper(url, [MetricsEndpoint(path="/metrics", format="prometheus")], tmp_path, 0.05)
    scraper.start()
    scraper.scrape_now("step-0-start")
    start_ns = time.perf_counter_ns()
    time.sleep(0.4)
    end_ns = time.perf_counter_ns()
    scraper.scrape_now("step-0-end")
    # readable while running
    records_live, _ = read_raw_scrapes(tmp_path / "scrapes.jsonl.gz")
    assert len(records_live) >= 3
    scraper.stop()
    assert scraper.errors == 0
    records, notes = read_raw_scrapes(tmp_path / "scrapes.jsonl.gz")
    assert notes == []
    tags = [r["tag"] for r in records]
    assert "step-0-start" in tags and "step-0-end" in tags and tags.count("poll") >= 3
    first = records[0]
    assert set(first) >= {"wall_ns", "mono_ns", "endpoint", "format", "tag", "status", "error", "body"}
    assert first["status"] == 200 and first["error"] is None and first["format"] == "prometheus"
    assert abs(first["wall_ns"] - time.time_ns()) < 60 * 10**9
    series = load_scrapes(tmp_path)
    _server, hits = step_server_stats(series, load_catalog("vllm", "0.32.0"), start_ns, end_ns)
    inside = [r for r in records if start_ns < r["mono_ns"] < end_ns]
    # every scrape adds 100: the step saw the polls inside it plus the end boundary
    assert hits.gpu == 100 * (len(inside) + 1)


def test_failures_are_recorded_never_raised(tmp_path: Path, server: tuple[str, _State]) -> None:
    url, _ = server
    endpoints = [MetricsEndpoint(path="/fail", format="prometheus"), MetricsEndpoint(path="/huge", format="prometheus")]
    scraper = Scraper(url, endpoints, tmp_path / "a", 0.02, max_consecutive_errors=3, max_body_bytes=1000)
    scraper.start()
    deadline = time.monotonic() + 5
    while scraper.errors < 6 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)
    polled = scraper.errors
    assert polled == 6  # both endpoints gave up after 3 consecutive failures each
    scraper.scrape_now("step-1-start")  # boundary scrapes are still attempted
    assert scraper.errors == 8
    scraper.stop()
    records, _ = read_raw_scrapes(tmp_path / "a" / "scrapes.jsonl.gz")
    fail = [r for r in records if r["endpoint"] == "/fail"]
    assert fail[0]["status"] == 500 and fail[0]["error"] == "HTTP 500" and fail[0]["body"] == "engine exploded"
    huge = [r for r in records if r["endpoint"] == "/huge"]
    assert huge[0]["error"] == "body too large (> 1000 bytes)" and huge[0]["body"] == ""

    refused = Scraper(f"http://127.0.0.1:{_free_port()}", [MetricsEndpoint(path="/metrics", format="prometheus")],
                      tmp_path / "b", 1.0, timeout_s=1.0)
    refused.scrape_now("step-0-start")
    refused.stop()
    assert refused.errors == 1
    rec, _ = read_raw_scrapes(tmp_path / "b" / "scrapes.jsonl.gz")
    assert rec[0]["status"] is None and "Connect" in rec[0]["error"]


def test_timeout_is_an_error_and_stop_is_bounded(tmp_path: Path, server: tuple[str, _State]) -> None:
    url, _ = server
    scraper = Scraper(url, [MetricsEndpoint(path="/slow", format="prometheus")], tmp_path, 0.05, timeout_s=0.2)
    scraper.start()
    time.sleep(0.3)
    began = time.monotonic()
    scraper.stop()
    assert time.monotonic() - began < 3.0
    assert scraper.errors >= 1
    records, _ = read_raw_scrapes(tmp_path / "scrapes.jsonl.gz")
    assert "Timeout" in records[0]["error"]
    scraper.scrape_now("after-stop")  # ignored, no raise
    with pytest.raises(RuntimeError):
        scraper.start()


def test_drained_json_queue_is_polled_and_summed(tmp_path: Path, server: tuple[str, _State]) -> None:
    url, state = server

    def iterate(n: int) -> None:
        with state.lock:
            for _ in range(n):
                state.iteration += 1
                state.reused += 2
                state.queue.append({"iter": state.iteration, "numActiveRequests": 1, "kvCacheStats": {
                    "reusedBlocks": state.reused, "missedBlocks": state.iteration, "tokensPerBlock": 16}})

    iterate(3)
    scraper = Scraper(url, [MetricsEndpoint(path="/iter", format="trtllm-json")], tmp_path, 0.05)
    scraper.scrape_now("step-0-start")
    start_ns = time.perf_counter_ns()
    scraper.start()
    for _ in range(4):
        iterate(5)
        time.sleep(0.12)
    end_ns = time.perf_counter_ns()
    scraper.scrape_now("step-0-end")
    scraper.stop()
    _server, hits = step_server_stats(load_scrapes(tmp_path), load_catalog("trtllm", "1.0.0"), start_ns, end_ns)
    assert hits.cached == 20 * 2 * 16  # 20 iterations inside the step, 2 reused blocks each
    assert hits.miss == 20 * 16


def test_constructor_rejects_bad_settings(tmp_path: Path) -> None:
    ep = [MetricsEndpoint(path="/metrics", format="prometheus")]
    with pytest.raises(ValueError, match="interval"):
        Scraper("http://127.0.0.1:1", ep, tmp_path, 0)
    with pytest.raises(ValueError, match="timeout"):
        Scraper("http://127.0.0.1:1", ep, tmp_path, 1, timeout_s=0)
