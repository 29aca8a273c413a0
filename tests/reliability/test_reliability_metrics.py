"""A failing metrics endpoint: every failed scrape is recorded and counted (bodies cut to a bound), polling gives up
after a limit of consecutive failures, nothing raises, and the run reports the figures as missing, never as 0."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from harness.engines import build_launch_spec
from harness.engines.spec import LaunchSpec, MetricsEndpoint
from harness.run.options import RunOptions
from harness.run.orchestrator import run_rollout
from harness.scrape.scraper import ERROR_BODY_CHARS, Scraper
from harness.scrape.series import load_scrapes


class _Failing(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"internal error " * 10_000
        self.send_response(500)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        return


@pytest.fixture
def failing_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_scraper_counts_errors_bounds_bodies_and_gives_up(failing_server: str, tmp_path: Path) -> None:
    scraper = Scraper(failing_server, [MetricsEndpoint(path="/metrics", format="prometheus")], tmp_path, 0.05,
                      timeout_s=2.0, max_consecutive_errors=3)
    scraper.start()
    deadline = time.monotonic() + 10
    while scraper.scrapes < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.5)  # polling has given up: no more attempts
    assert scraper.scrapes == 3 and scraper.errors == 3
    scraper.scrape_now("step-0-end")  # boundary scrapes still happen, and still never raise
    scraper.stop()
    assert scraper.errors == 4
    series = load_scrapes(tmp_path)
    assert len(series.scrapes) == 4
    for scrape in series.scrapes:
        assert scrape.status == 500 and scrape.error == "HTTP 500"
        assert len(scrape.body) <= ERROR_BODY_CHARS


def test_run_with_a_failing_metrics_endpoint_reports_scrape_errors(
        scenario: Callable[..., Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = build_launch_spec

    def broken_metrics(*args: Any, **kwargs: Any) -> LaunchSpec:
        spec = real(*args, **kwargs)
        return spec.model_copy(update={"metrics": [MetricsEndpoint(path="/no-such-metrics", format="prometheus")]})

    monkeypatch.setattr("harness.run.arm_server.build_launch_spec", broken_metrics)
    path = scenario("nometrics", arms=("baseline",))
    result = run_rollout(path, RunOptions(out_dir=tmp_path / "results", write_reports=False), say=lambda _m: None)
    assert result.summary is not None, result.message
    assert result.exit_code != 4
    for arm in result.summary.arms:
        assert arm.failure is None and arm.steps
        step = arm.steps[0]
        assert step.requests > 0 and step.ttft_ms.p99 is not None, "client-side figures are unaffected"
        assert step.server.scrape_errors >= 2 and step.server.scrapes == step.server.scrape_errors
        assert step.hit_tokens.gpu is None and step.hit_tokens.miss is None, "unknown, never 0"
    assert result.summary.missing_metrics, "the missing series are named in the summary"
