"""Scrapes and host readings on the virtual clock: the same files as the real scraper and host sampler write.

:class:`VirtualScraper` stands where :class:`harness.scrape.scraper.Scraper` does: it polls every ``interval_s``
virtual seconds from its start (events on the virtual clock, never a thread) and at the boundaries the conductor
asks for (:meth:`VirtualScraper.scrape_now`), and appends one record per endpoint to ``scrapes.jsonl.gz`` through
:class:`~harness.scrape.rawlog.RawScrapeWriter`. The body is the engine's exposition text at that virtual instant
(what ``GET /metrics`` of the served simulator returns), so the same parser reads it later. A scrape while no engine
runs (between a restart's stop and start) is recorded as a failed one, as a refused connection is.

:class:`VirtualHostNotes` stands where :class:`harness.scrape.telemetry.sampler.HostSampler` does. The host's own
figures (memory, ``/dev/shm``, disk devices, GPUs) say nothing about a virtual run, so its readings carry no figures,
only the note :data:`NOT_MEASURED`, which the per-step host summary shows in their place.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from harness.engines.spec import MetricsEndpoint
from harness.rundir.layout import HOST_FILE, SCRAPES_FILE
from harness.scrape.rawlog import RawScrapeWriter
from harness.virtual.clock import PRIO_OBSERVE, EventQueue

NOT_MEASURED = "not measured on the virtual clock"
Source = Callable[[str], tuple[int | None, str, str | None]]  # path -> (status, body, error)


class VirtualScraper:
    """Scrapes ``endpoints`` of the arm's engine (``source``) into ``out_dir/scrapes.jsonl.gz``."""

    def __init__(self, queue: EventQueue, source: Source, endpoints: Sequence[MetricsEndpoint], out_dir: Path,
                 interval_s: float) -> None:
        if interval_s <= 0:
            raise ValueError(f"scrape interval must be positive, got {interval_s}")
        self.queue = queue
        self.source = source
        self.endpoints = list(endpoints)
        self.interval_ns = int(interval_s * 1e9)
        self.path = out_dir / SCRAPES_FILE
        self._writer: RawScrapeWriter | None = None
        self.scrapes = 0
        self.errors = 0

    def start(self) -> None:
        """Open the file and poll now and every interval from now on."""
        self._writer = RawScrapeWriter(self.path)
        self._poll()

    def _poll(self) -> None:
        if self._writer is None:
            return
        for endpoint in self.endpoints:
            self._scrape(endpoint, "poll")
        self.queue.at(self.queue.clock.mono_ns() + self.interval_ns, PRIO_OBSERVE, self._poll)

    def scrape_now(self, tag: str) -> None:
        """Scrape every endpoint now, with ``tag``."""
        if self._writer is None:
            return
        for endpoint in self.endpoints:
            self._scrape(endpoint, tag)

    def stop(self) -> None:
        """Stop polling and close the file (idempotent)."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    def _scrape(self, endpoint: MetricsEndpoint, tag: str) -> None:
        assert self._writer is not None
        clock = self.queue.clock
        status, body, error = self.source(endpoint.path)
        self._writer.write({"wall_ns": clock.wall_ns(), "mono_ns": clock.mono_ns(), "endpoint": endpoint.path,
                            "format": endpoint.format, "tag": tag, "status": status, "error": error, "body": body,
                            "duration_ms": 0.0})
        self.scrapes += 1
        self.errors += error is not None


class VirtualHostNotes:
    """Host readings without figures, every ``interval_s`` virtual seconds, into ``out_dir/host.jsonl``."""

    def __init__(self, queue: EventQueue, out_dir: Path, interval_s: float, disk_dirs: Sequence[str] = ()) -> None:
        self.queue = queue
        self.path = out_dir / HOST_FILE
        self.interval_ns = int(interval_s * 1e9)
        self.disk_dirs = list(dict.fromkeys(disk_dirs))
        self._fh: IO[str] | None = None

    def start(self) -> None:
        """Open the file, write a reading now and every interval."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a", encoding="utf-8")
        self._tick()

    def stop(self) -> None:
        """A last reading, then close the file (idempotent)."""
        if self._fh is None:
            return
        self._write()
        self._fh.close()
        self._fh = None

    def _tick(self) -> None:
        if self._fh is None:
            return
        self._write()
        self.queue.at(self.queue.clock.mono_ns() + self.interval_ns, PRIO_OBSERVE, self._tick)

    def _write(self) -> None:
        assert self._fh is not None
        clock = self.queue.clock
        record: dict[str, Any] = {
            "wall_ns": clock.wall_ns(), "mono_ns": clock.mono_ns(), "mem": {}, "mem_note": NOT_MEASURED,
            "shm": {"total": None, "used": None}, "shm_note": NOT_MEASURED,
            "disks": {d: {"note": NOT_MEASURED} for d in self.disk_dirs}, "gpu_note": NOT_MEASURED}
        self._fh.write(json.dumps(record, separators=(",", ":")) + "\n")
        self._fh.flush()
