"""Poll a server's metrics endpoints in a background thread and at step boundaries; keep every raw scrape.

The main thread stays plain synchronous Python: :meth:`Scraper.start` starts one daemon thread that polls every
``interval_s``; :meth:`Scraper.scrape_now` scrapes synchronously in the caller's thread (tag it, e.g.
``step-0-start``). Scrapes never overlap (a boundary scrape waits for an in-flight poll), so counters read in
send order never appear to go backwards. Every response, good or bad, becomes one record in
``out_dir/scrapes.jsonl.gz`` with ``wall_ns`` (``time.time_ns``) and ``mono_ns`` (``time.perf_counter_ns``, taken
when the request is sent), so the analysis can line scrapes up with request records. A failing endpoint is
recorded and counted in :attr:`errors`; it never raises into the caller.

Call ``scrape_now("step-N-start")`` before taking a step's ``start_ns`` and ``scrape_now("step-N-end")`` after its
``end_ns``: the boundary scrapes then bracket the step exactly.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from harness.engines.spec import MetricsEndpoint
from harness.scrape.rawlog import SCRAPES_FILE, RawScrapeWriter

log = logging.getLogger(__name__)
MAX_BODY_BYTES = 32 << 20
ERROR_BODY_CHARS = 2000


class Scraper:
    """Scrapes ``endpoints`` of ``base_url`` into ``out_dir/scrapes.jsonl.gz``."""

    def __init__(self, base_url: str, endpoints: list[MetricsEndpoint], out_dir: Path, interval_s: float, *,
                 timeout_s: float = 5.0, max_consecutive_errors: int = 1000,
                 max_body_bytes: int = MAX_BODY_BYTES) -> None:
        if interval_s <= 0:
            raise ValueError(f"scrape interval must be positive, got {interval_s}")
        if timeout_s <= 0:
            raise ValueError(f"scrape timeout must be positive, got {timeout_s}")
        if max_consecutive_errors < 1:
            raise ValueError("max_consecutive_errors must be at least 1")
        self.base_url = base_url.rstrip("/")
        self.endpoints = list(endpoints)
        self.interval_s = float(interval_s)
        self.timeout_s = float(timeout_s)
        self.max_consecutive_errors = max_consecutive_errors
        self.max_body_bytes = max_body_bytes
        self.path = out_dir / SCRAPES_FILE
        self._writer = RawScrapeWriter(self.path)
        self._lock = threading.Lock()
        self._serial = threading.Lock()  # one scrape at a time: send order is the order the server answered in
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._errors = 0
        self._scrapes = 0
        self._consecutive: dict[str, int] = {e.path: 0 for e in self.endpoints}
        self._given_up: set[str] = set()
        self._sync_client: httpx.Client | None = None
        self._closed = False

    # -- public API ----------------------------------------------------------------------------------------------

    @property
    def errors(self) -> int:
        """Failed scrapes so far (HTTP errors, connection failures, timeouts, oversize bodies, write failures)."""
        with self._lock:
            return self._errors

    @property
    def scrapes(self) -> int:
        """Scrape attempts so far, failed ones included."""
        with self._lock:
            return self._scrapes

    def start(self) -> None:
        """Start polling in a background thread (once)."""
        if self._thread is not None or self._closed:
            raise RuntimeError("Scraper.start() may be called once, before stop()")
        self._thread = threading.Thread(target=self._run, name="harness-scraper", daemon=True)
        self._thread.start()

    def scrape_now(self, tag: str) -> None:
        """Scrape every endpoint now, in this thread, with ``tag``; never raises for endpoint failures."""
        if self._closed:
            log.warning("scrape_now(%r) after stop(): ignored", tag)
            return
        if self._sync_client is None:
            self._sync_client = self._client()
        for endpoint in self.endpoints:
            self._scrape(self._sync_client, endpoint, tag)

    def stop(self, join_timeout_s: float | None = None) -> None:
        """Stop polling, wait a bounded time for the thread, and close the file (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            bound = join_timeout_s if join_timeout_s is not None else \
                self.timeout_s * max(1, len(self.endpoints)) + 2.0
            self._thread.join(bound)
            if self._thread.is_alive():
                log.warning("scraper thread still busy after %.1f s; closing its file anyway", bound)
        if self._sync_client is not None:
            self._sync_client.close()
            self._sync_client = None
        self._closed = True
        try:
            self._writer.close()
        except OSError as exc:  # disk full: what was written before stays readable; never raise into the caller
            log.warning("scraper: cannot close %s: %s", self.path, exc)

    def __enter__(self) -> Scraper:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- internals -----------------------------------------------------------------------------------------------

    def _client(self) -> httpx.Client:
        return httpx.Client(timeout=httpx.Timeout(self.timeout_s), follow_redirects=False, trust_env=False)

    def _run(self) -> None:
        with self._client() as client:
            next_t = time.monotonic()
            while not self._stop.is_set():
                active = [e for e in self.endpoints if e.path not in self._given_up]
                if not active:
                    log.warning("scraper: every endpoint failed %d times in a row; polling stopped",
                                self.max_consecutive_errors)
                    return
                for endpoint in active:
                    if self._stop.is_set():
                        return
                    self._scrape(client, endpoint, "poll")
                next_t += self.interval_s
                now = time.monotonic()
                next_t = max(next_t, now)  # fell behind (slow server): skip the missed ticks
                self._stop.wait(next_t - now)

    def _fetch(self, client: httpx.Client, url: str) -> tuple[int | None, str, str | None]:
        try:
            with client.stream("GET", url) as resp:
                buf = bytearray()
                for chunk in resp.iter_bytes():
                    buf += chunk
                    if len(buf) > self.max_body_bytes:
                        return resp.status_code, "", f"body larger than {self.max_body_bytes} bytes"
                body = buf.decode(resp.encoding or "utf-8", errors="replace")
                if not 200 <= resp.status_code < 300:
                    return resp.status_code, body[:ERROR_BODY_CHARS], f"HTTP {resp.status_code}"
                return resp.status_code, body, None
        except httpx.HTTPError as exc:
            return None, "", f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        except (OSError, ValueError, LookupError) as exc:  # odd sockets, bad encodings
            return None, "", f"{type(exc).__name__}: {exc}"

    def _scrape(self, client: httpx.Client, endpoint: MetricsEndpoint, tag: str) -> None:
        with self._serial:
            self._scrape_serial(client, endpoint, tag)

    def _scrape_serial(self, client: httpx.Client, endpoint: MetricsEndpoint, tag: str) -> None:
        wall_ns, mono_ns = time.time_ns(), time.perf_counter_ns()
        status, body, error = self._fetch(client, self.base_url + endpoint.path)
        record: dict[str, Any] = {
            "wall_ns": wall_ns, "mono_ns": mono_ns, "endpoint": endpoint.path, "format": endpoint.format,
            "tag": tag, "status": status, "error": error, "body": body,
            "duration_ms": round((time.perf_counter_ns() - mono_ns) / 1e6, 3),
        }
        try:
            written = self._writer.write(record)
        except OSError as exc:
            written, error = False, error or f"write failed: {exc}"
            log.warning("scraper: cannot write %s: %s", self.path, exc)
        if not written and error is None:
            return  # closed while a poll was in flight: nothing to count
        with self._lock:
            self._scrapes += 1
            if error is None:
                self._consecutive[endpoint.path] = 0
                return
            self._errors += 1
            self._consecutive[endpoint.path] = self._consecutive.get(endpoint.path, 0) + 1
            if tag == "poll" and self._consecutive[endpoint.path] >= self.max_consecutive_errors:
                self._given_up.add(endpoint.path)
