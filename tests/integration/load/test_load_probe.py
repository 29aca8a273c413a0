"""``harness probe``: passes against the simulator; one clear sentence (exit 1) against a non-OpenAI server."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from harness.load.probe import probe, probe_command
from tests.support.sim import SimHandle, running_sim

app = typer.Typer()
app.command()(probe_command)


@pytest.fixture(scope="module")
def sim() -> Iterator[SimHandle]:
    with running_sim(profile="demo", time_scale=0.05) as handle:
        yield handle


class _Html(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<!doctype html><html><body>It works!</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET  # noqa: N815 - the handler's method name

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def html_server() -> Iterator[str]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Html)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_probe_passes_against_the_simulator(sim: SimHandle) -> None:
    report = probe(sim.base_url + "/v1", None, 10.0)
    assert report.ok, report.render()
    assert report.model == "sim-model"
    statuses = {c.name: c.status for c in report.checks}
    assert statuses == {"models": "ok", "chat": "ok", "chat_stream": "ok", "completions_stream": "ok",
                        "usage_in_stream": "ok", "cached_tokens": "ok", "tokenize": "ok", "metrics": "ok"}
    result = CliRunner().invoke(app, [sim.base_url, "--json"])
    assert result.exit_code == 0
    assert json.loads(result.output)["ok"] is True


def test_probe_names_a_missing_model(sim: SimHandle) -> None:
    result = CliRunner().invoke(app, [sim.base_url, "--model", "llama-9000"])
    assert result.exit_code == 1
    assert "model 'llama-9000' is not served; served: sim-model" in result.output


def test_probe_fails_clearly_against_a_non_openai_server(html_server: str) -> None:
    result = CliRunner().invoke(app, [html_server])
    assert result.exit_code == 1
    assert "does not look like an OpenAI-compatible server" in result.output
    assert "Traceback" not in result.output
    report = probe(html_server, None, 5.0)
    assert [c.name for c in report.checks] == ["models"] and not report.ok


def test_probe_of_nothing_listening() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    report = probe(f"http://127.0.0.1:{port}", None, 5.0)
    assert not report.ok and "cannot connect" in report.checks[0].detail
