"""Poll a server's metrics endpoints in a background thread and at step boundaries; keep every raw scrape.

The main thread stays plain synchronous Python: :meth:`Scraper.start` starts one daemon thread that polls every
``interval_s``; :meth:`Scraper.scrape_now` scrapes synchronously in the caller's thread (tag it, e.g.
``step-0-start``). Scrapes never overlap (a boundary scrape waits for an in-flight poll), so counters read in
send order never appear to go backwards. Every response, good or bad, becomes one record in
``out_dir/scrapes.jsonl.gz`` with ``wall_ns`` (``time.time_ns``) and ``mono_ns`` (``time.perf_counter_ns``, taken
when the request is sent), so the analysis can line scrapes up with request records. A failing endpoint is
recorded and counted in :attr:`errors`; it never raises into the caller.

Each scrape is one whole request under a deadline of ``timeout_s`` (headers and body together: a server that
drips its body or its headers cannot hold a scrape longer) with its body capped at ``max_body_bytes`` after
decompression (:data:`~harness.core.net.caps.METRICS_MAX_BYTES`; a gzip bomb is the error ``body too large (> N
bytes)``). :meth:`stop` and the ``cancel`` event (Ctrl-C in a run) end a scrape in flight within about 0.1 s.

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

from harness.core.net.bounded import FetchError, fetch
from harness.core.net.caps import METRICS_MAX_BYTES
from harness.engines.spec import MetricsEndpoint
from harness.rundir.layout import SCRAPES_FILE
from harness.scrape.rawlog import RawScrapeWriter

log = logging.getLogger(__name__)
MAX_BODY_BYTES = METRICS_MAX_BYTES
ERROR_BODY_CHARS = 2000


class Scraper:
    """Scrapes ``endpoints`` of ``base_url`` into ``out_dir/scrapes.jsonl.gz``."""

    def __init__(self, base_url: str, endpoints: list[MetricsEndpoint], out_dir: Path, interval_s: float, *,
                 timeout_s: float = 5.0, max_consecutive_errors: int = 1000,
                 max_body_bytes: int = MAX_BODY_BYTES, cancel: threading.Event | None = None) -> None:
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
        self._cancel = cancel if cancel is not None else threading.Event()  # ends a boundary scrape (Ctrl-C)
        self._thread: threading.Thread | None = None
        self._errors = 0
        self._scrapes = 0
        self._consecutive: dict[str, int] = {e.path: 0 for e in self.endpoints}
        self._given_up: set[str] = set()
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
        for endpoint in self.endpoints:
            self._scrape(endpoint, tag, self._cancel)

    def stop(self, join_timeout_s: float | None = None) -> None:
        """Stop polling, wait a bounded time for the thread, and close the file (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            bound = join_timeout_s if join_timeout_s is not None else \
                self.timeout_s * max(1, len(self.endpoints)) + 2.0
            self._thread.join(bound)
            if self._thread.is_alive():
                log.warning("scraper thread still busy after %.1f s; closing its file anyway", bound)
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

    def _run(self) -> None:
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
                self._scrape(endpoint, "poll", self._stop)
            next_t += self.interval_s
            now = time.monotonic()
            next_t = max(next_t, now)  # fell behind (slow server): skip the missed ticks
            self._stop.wait(next_t - now)

    def _fetch(self, url: str, cancel: threading.Event) -> tuple[int | None, str, str | None]:
        try:
            resp = fetch("GET", url, deadline_s=self.timeout_s, max_body_bytes=self.max_body_bytes, cancel=cancel)
        except FetchError as exc:
            return None, "", str(exc)
        body = resp.text()
        if not 200 <= resp.status < 300:
            return resp.status, body[:ERROR_BODY_CHARS], f"HTTP {resp.status}"
        return resp.status, body, None

    def _scrape(self, endpoint: MetricsEndpoint, tag: str, cancel: threading.Event) -> None:
        with self._serial:
            self._scrape_serial(endpoint, tag, cancel)

    def _scrape_serial(self, endpoint: MetricsEndpoint, tag: str, cancel: threading.Event) -> None:
        wall_ns, mono_ns = time.time_ns(), time.perf_counter_ns()
        status, body, error = self._fetch(self.base_url + endpoint.path, cancel)
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
