"""Issue 17, items 5-10 and 12 (probe of a bad URL): no hostile server can hang the harness or make it read without end.

Every case talks to a :class:`hostile_server.HostileServer` on 127.0.0.1 (started and stopped by the test) and
drives a real code path: ``harness probe`` as a subprocess (wall time, exit code, stderr, peak RSS polled with
psutil), :func:`wait_ready`, the :class:`Scraper`, and the load client's streaming request. Each case's wall time
is asserted against its configured timeout plus a few seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest
import typer
from hostile_server import HostileServer, hostile
from typer.testing import CliRunner

from harness.core.net.caps import API_MAX_BYTES, METRICS_MAX_BYTES, SSE_LINE_MAX_BYTES
from harness.engines.spec import MetricsEndpoint
from harness.launch.base import LaunchError
from harness.launch.readiness import wait_ready
from harness.load.probe import CHECKS, probe_command
from harness.scrape.rawlog import read_raw_scrapes
from harness.scrape.scraper import Scraper

HARNESS = Path(sys.executable).with_name("harness")
SLACK_S = 8.0  # process start-up (openai, typer imports: 2-5 s at load average 5 on the 2-core host)
RSS_CAP_MB = 200  # growth allowed while refusing a gzip bomb (the bomb inflates to ~3 GiB)
PROBE_APP = typer.Typer()
PROBE_APP.command()(probe_command)


@dataclass
class Ran:
    rc: int
    out: str
    err: str
    wall_s: float
    peak_rss_mb: float


def run_harness(args: list[str], *, env: dict[str, str] | None = None, limit_s: float = 60.0,
                on_start: Callable[[subprocess.Popen[str]], None] | None = None) -> Ran:
    """Run ``harness ARGS``, polling its RSS every 20 ms; kill it (and fail) past ``limit_s``."""
    full_env = {**os.environ, "HARNESS_STATE_DIR": "/tmp/network-state", **(env or {})}
    began = time.monotonic()
    proc = subprocess.Popen([str(HARNESS), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=full_env)
    if on_start is not None:
        threading.Thread(target=on_start, args=(proc,), daemon=True).start()
    peak = 0
    ps = psutil.Process(proc.pid)
    try:
        while proc.poll() is None and time.monotonic() - began < limit_s:
            try:
                peak = max(peak, ps.memory_info().rss)
            except psutil.Error:
                break
            time.sleep(0.02)
        out, err = proc.communicate(timeout=max(1.0, limit_s - (time.monotonic() - began)))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return Ran(proc.returncode, out, err, time.monotonic() - began, peak / 2**20)


def assert_clean(ran: Ran) -> None:
    assert "Traceback" not in ran.err and "Traceback" not in ran.out, ran.err
    assert "\x1b" not in ran.out and "\x1b" not in ran.err


@dataclass
class FakeSpec:
    readiness_path: str = "/v1/models"
    served_model_name: str = "m"


class FakeServer:
    """A RunningServer stand-in for :func:`wait_ready`: alive, pointing at the hostile server."""

    def __init__(self, url: str) -> None:
        self.base_url = url
        self.spec = FakeSpec()

    def alive(self) -> bool:
        return True

    def exit_description(self) -> str | None:
        return None

    def log_tail(self) -> list[str]:
        return []


class PeakRss:
    """Peak RSS growth of this process while the block runs (sampled every 10 ms)."""

    def __init__(self) -> None:
        self._proc = psutil.Process()
        self.base = self._proc.memory_info().rss
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, self._proc.memory_info().rss)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(2)

    @property
    def growth_mb(self) -> float:
        return (self.peak - self.base) / 2**20


# -- probe (items 5, 6, 8, 10, 12) ---------------------------------------------------------------------------


def test_probe_against_slowloris_headers_ends_at_its_timeout() -> None:
    with hostile("slowloris") as srv:
        ran = run_harness(["probe", srv.url, "--timeout", "5"])
    assert_clean(ran)
    assert ran.rc == 1  # the probe's verdict "not usable", with the reason; not an error
    assert 5.0 <= ran.wall_s < 5.0 + SLACK_S, ran.wall_s
    assert "GET /v1/models gave no complete answer within --timeout 5 s" in ran.out


@pytest.mark.parametrize("fault", ["sse_endless", pytest.param("sse_comments", marks=pytest.mark.slow)])
def test_probe_against_endless_streams_is_bounded(fault: str) -> None:
    with hostile(fault) as srv:
        ran = run_harness(["probe", srv.url, "--timeout", "2", "--json"])
    assert_clean(ran)
    assert ran.rc == 1
    report = json.loads(ran.out)
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["models"]["status"] == "ok"
    ended = ("no complete answer within --timeout 2 s", f"answered a body too large (> {API_MAX_BYTES} bytes)")
    for name in ("chat_stream", "completions_stream"):  # whichever comes first: the deadline or the cap
        assert any(e in checks[name]["detail"] for e in ended), checks[name]
    assert ran.wall_s < CHECKS * 2.0 + SLACK_S, ran.wall_s  # the stated bound: CHECKS x --timeout


def test_probe_refuses_a_512_mib_sse_line_at_the_cap() -> None:
    with hostile("sse_longline") as srv:
        ran = run_harness(["probe", srv.url, "--timeout", "5", "--json"])
    assert_clean(ran)
    checks = {c["name"]: c for c in json.loads(ran.out)["checks"]}
    assert f"line too long (> {SSE_LINE_MAX_BYTES} bytes without a newline)" in checks["chat_stream"]["detail"]
    assert ran.wall_s < 5.0 + SLACK_S, ran.wall_s  # refused at 1 MiB, not read for 2 x 5 s
    assert ran.peak_rss_mb < 400, ran.peak_rss_mb


def test_probe_refuses_a_gzip_bomb_on_models_with_bounded_memory() -> None:
    with hostile("gzip_bomb") as srv:
        ran = run_harness(["probe", srv.url, "--timeout", "5"])
    assert_clean(ran)
    assert ran.rc == 1
    assert f"GET /v1/models answered a body too large (> {API_MAX_BYTES} bytes) - refused" in ran.out
    assert ran.wall_s < 5.0 + SLACK_S
    assert ran.peak_rss_mb < 400, ran.peak_rss_mb  # the bomb is ~3 GiB inflated; the process is ~150 MB


def test_probe_sends_no_credential_unless_asked_and_prints_escapes_safely(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-hardening-not-for-strangers"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("PROBE_TOKEN", secret)
    with hostile("escapes") as srv:
        plain = CliRunner().invoke(PROBE_APP, [srv.url, "--timeout", "5"])
        unasked = list(srv.seen_headers)
        srv.seen_headers.clear()
        asked = CliRunner().invoke(PROBE_APP, [srv.url, "--timeout", "5", "--api-key-env", "PROBE_TOKEN"])
        sent = [h for h in srv.seen_headers if h[":path"].startswith("/v1/")]
    for result in (plain, asked):
        assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
        assert result.exit_code == 1  # the escaped model answers no chat: not usable
        assert secret not in result.output and "\x1b" not in result.output
        assert "\\x1b]0;pwned\\x07\\x1b[2J" in result.output  # shown, not executed
    assert unasked and all("authorization" not in h for h in unasked)
    assert "credential: none sent" in plain.output
    assert sent and all(h.get("authorization") == f"Bearer {secret}" for h in sent)
    assert "credential: Authorization: Bearer $PROBE_TOKEN was sent" in asked.output


def test_probe_bad_url_and_unset_key_variable_are_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    ran = run_harness(["probe", "http://[::1", "--timeout", "5"])
    assert_clean(ran)
    assert ran.rc == 2 and "bad URL 'http://[::1'" in ran.err, ran.err
    monkeypatch.delenv("NO_SUCH_PROBE_KEY", raising=False)
    result = CliRunner().invoke(PROBE_APP, ["http://127.0.0.1:9", "--api-key-env", "NO_SUCH_PROBE_KEY"])
    assert result.exit_code == 2 and "environment variable NO_SUCH_PROBE_KEY is not set" in result.output


def test_probe_stops_on_ctrl_c() -> None:
    """Ctrl-C ends a probe that a slow server holds, soon after the signal, not at ``--timeout`` (60 s). The signal
    goes once the probe is waiting on the server (its first request was seen), so a slow start on a loaded host
    cannot make the signal land during start-up; the bound (10 s) is far below the timeout it must beat."""
    sent_at: list[float] = []

    def interrupt(proc: subprocess.Popen[str]) -> None:
        deadline = time.monotonic() + 30.0
        while not srv.seen_headers and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.5)  # in the middle of the slow answer
        sent_at.append(time.monotonic())
        proc.send_signal(signal.SIGINT)

    with hostile("slowloris") as srv:
        ran = run_harness(["probe", srv.url, "--timeout", "60"], on_start=interrupt, limit_s=45)
        ended = time.monotonic()
    assert "Traceback" not in ran.err
    assert sent_at, "the probe never reached the server"
    assert ran.rc not in (0, 1), ran.rc
    assert "interrupted (Ctrl-C)" in ran.err, ran.err
    assert ended - sent_at[0] < 10.0, (ended - sent_at[0], ran)  # the signal ended it, not --timeout 60


# -- readiness (item 7, 10) --------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["slowloris", "drip"])
def test_readiness_is_bounded_by_its_timeout(fault: str) -> None:
    with hostile(fault) as srv:
        began = time.monotonic()
        with pytest.raises(LaunchError) as err:
            wait_ready(FakeServer(srv.url), 2.0)  # type: ignore[arg-type]
        waited = time.monotonic() - began
    assert 2.0 <= waited < 2.0 + 1.0, waited
    assert err.value.phase == "readiness"
    assert "not ready after 2 s (last: Timeout: no complete answer within" in err.value.message


def test_readiness_refuses_a_gzip_bomb_with_bounded_memory() -> None:
    with hostile("gzip_bomb") as srv, PeakRss() as rss:
        began = time.monotonic()
        with pytest.raises(LaunchError) as err:
            wait_ready(FakeServer(srv.url), 2.0)  # type: ignore[arg-type]
        waited = time.monotonic() - began
    assert waited < 2.0 + 1.0
    assert f"body too large (> {API_MAX_BYTES} bytes)" in err.value.message
    assert rss.growth_mb < RSS_CAP_MB, rss.growth_mb


def test_readiness_stops_on_cancel() -> None:
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    with hostile("slowloris") as srv:
        began = time.monotonic()
        with pytest.raises(LaunchError, match="interrupted while waiting for readiness"):
            wait_ready(FakeServer(srv.url), 60.0, cancel=cancel)  # type: ignore[arg-type]
    assert time.monotonic() - began < 0.5 + 0.5


# -- scraper (items 7, 10) ---------------------------------------------------------------------------------


@pytest.fixture
def scraper_for(tmp_path: Path) -> Iterator[Callable[[HostileServer, float], Scraper]]:
    made: list[Scraper] = []

    def make(srv: HostileServer, timeout_s: float) -> Scraper:
        scraper = Scraper(srv.url, [MetricsEndpoint(path="/metrics", format="prometheus")], tmp_path, 0.5,
                          timeout_s=timeout_s)
        made.append(scraper)
        return scraper

    yield make
    for scraper in made:
        scraper.stop()


def _records(scraper: Scraper) -> list[dict[str, Any]]:
    scraper.stop()
    records, _ = read_raw_scrapes(scraper.path)
    return records


def test_scrape_of_a_dripping_metrics_endpoint_ends_at_its_deadline(
        scraper_for: Callable[[HostileServer, float], Scraper]) -> None:
    with hostile("drip") as srv:
        scraper = scraper_for(srv, 1.5)
        began = time.monotonic()
        scraper.scrape_now("step-0-start")
        took = time.monotonic() - began
    assert 1.5 <= took < 1.5 + 1.0, took
    (record,) = _records(scraper)
    assert record["error"] == "Timeout: no complete answer within 1.5 s" and scraper.errors == 1


def test_scrape_refuses_a_gzip_bomb_with_bounded_memory(
        scraper_for: Callable[[HostileServer, float], Scraper]) -> None:
    with hostile("gzip_bomb") as srv, PeakRss() as rss:
        scraper = scraper_for(srv, 5.0)
        began = time.monotonic()
        scraper.scrape_now("step-0-start")
        took = time.monotonic() - began
    assert took < 5.0
    (record,) = _records(scraper)
    assert record["error"] == f"body too large (> {METRICS_MAX_BYTES} bytes)" and record["body"] == ""
    assert rss.growth_mb < RSS_CAP_MB, rss.growth_mb


def test_scraper_stop_ends_a_scrape_in_flight(scraper_for: Callable[[HostileServer, float], Scraper]) -> None:
    with hostile("slowloris") as srv:
        scraper = scraper_for(srv, 30.0)
        scraper.start()
        time.sleep(0.5)
        began = time.monotonic()
        scraper.stop()
        assert time.monotonic() - began < 1.0


# -- load client (item 9 and the streaming deadline) -------------------------------------------------------

_CLIENT_SCRIPT = """
import json, sys, time
from harness.load.client import Exchange, Timeouts, make_client
client = make_client(sys.argv[2], sys.argv[1], Timeouts(request_s=float(sys.argv[3]), idle_s=2.0))
ex = Exchange("chat")
began = time.monotonic()
client.post_stream("/v1/chat/completions", b'{"model":"m","stream":true}', ex)
print(json.dumps({"kind": ex.st.error_kind, "detail": ex.st.error_detail, "s": time.monotonic() - began,
                  "cpu_s": time.process_time()}))
"""


def _stream(srv: HostileServer, backend: str, request_s: float) -> tuple[dict[str, Any], Ran]:
    began = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", _CLIENT_SCRIPT, srv.url, backend, str(request_s)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ps, peak = psutil.Process(proc.pid), 0
    while proc.poll() is None and time.monotonic() - began < request_s + 20:
        try:
            peak = max(peak, ps.memory_info().rss)
        except psutil.Error:
            break
        time.sleep(0.02)
    if proc.poll() is None:
        proc.kill()
    out, err = proc.communicate()
    ran = Ran(proc.returncode, out, err, time.monotonic() - began, peak / 2**20)
    assert ran.rc == 0 and "Traceback" not in err, err
    return json.loads(out), ran


@pytest.mark.parametrize("backend", ["gevent", "httpx"])
def test_stream_of_a_512_mib_line_is_malformed_at_the_cap(backend: str) -> None:
    with hostile("sse_longline") as srv:
        result, ran = _stream(srv, backend, 10.0)
    assert result["kind"] == "malformed_stream"
    assert f"SSE line too long (> {SSE_LINE_MAX_BYTES} bytes" in result["detail"]
    assert result["s"] < 2.0, result  # at the 1 MiB cap, long before request_timeout_s=10
    assert result["cpu_s"] < 5.0 and ran.peak_rss_mb < 300, (result, ran.peak_rss_mb)


@pytest.mark.parametrize("fault", ["sse_comments", pytest.param("sse_endless", marks=pytest.mark.slow)])
def test_endless_stream_ends_at_request_timeout(fault: str) -> None:
    with hostile(fault) as srv:
        result, ran = _stream(srv, "gevent", 2.0)
    assert result["kind"] == "timeout", result
    assert "request_timeout_s=2" in result["detail"]
    assert 2.0 <= result["s"] < 2.0 + 1.0, result
    assert ran.peak_rss_mb < 300, ran.peak_rss_mb
