"""Sample host telemetry in a background thread into ``metrics/<arm>/host.jsonl`` (one JSON object per reading).

Like the scraper (:mod:`harness.scrape.scraper`): :meth:`HostSampler.start` starts one daemon thread that reads the
host every ``interval_s``, :meth:`HostSampler.stop` takes a last reading and closes the file; it never raises into
the caller. Each record has ``mono_ns`` (``time.perf_counter_ns``, the clock of the step spans) and ``wall_ns``, the
raw counters (cumulative disk bytes and busy milliseconds, so a step's rate is a before/after difference), and a
``*_note`` wherever a figure could not be read. ``harness report RUN_DIR`` summarises the file per step.

The disk-tier devices watched are those under every disk-tier ``root_dir`` of the scenario, in every arm: the
baseline then shows whether the device a disk tier will use is already busy.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from harness.rundir.layout import HOST_FILE
from harness.scrape.telemetry.probes import Nvml, block_device, read_diskstats, read_meminfo, read_shm

log = logging.getLogger(__name__)
MEM_KEYS = ("MemTotal", "MemAvailable", "Cached", "Buffers", "Dirty", "Shmem")


class HostSampler:
    """Reads the host every ``interval_s`` into ``out_dir/host.jsonl``."""

    def __init__(self, out_dir: Path, interval_s: float, disk_dirs: Sequence[str] = (), *, gpu: bool = True) -> None:
        if interval_s <= 0:
            raise ValueError(f"sampling interval must be positive, got {interval_s}")
        self.path = out_dir / HOST_FILE
        self.interval_s = float(interval_s)
        self.disk_dirs = list(dict.fromkeys(disk_dirs))
        self._gpu_wanted = gpu
        self._nvml: Nvml | None = None
        self._devices: dict[str, tuple[str | None, str | None]] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._fh: IO[str] | None = None
        self.samples = 0

    def start(self) -> None:
        """Open the file and start sampling (once); a file that cannot be opened only logs a warning."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = self.path.open("a", encoding="utf-8")
        except OSError as exc:
            log.warning("host telemetry: cannot open %s: %s", self.path, exc)
            return
        self._nvml = Nvml.open() if self._gpu_wanted else Nvml(note="not available: GPU sampling switched off")
        self._devices = {d: block_device(d) for d in self.disk_dirs}
        self.sample_now()
        self._thread = threading.Thread(target=self._run, name="harness-host-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Take a last reading, stop the thread and close the file (idempotent, never raises)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.interval_s + 5.0)
        if self._fh is not None:
            self.sample_now()
        with self._lock:
            if self._fh is not None:
                try:
                    self._fh.close()
                except OSError as exc:
                    log.warning("host telemetry: cannot close %s: %s", self.path, exc)
                self._fh = None
        if self._nvml is not None:
            self._nvml.close()

    def sample_now(self) -> None:
        """One reading, written at once (a crash keeps every earlier line)."""
        try:
            record = self.read()
        except Exception as exc:  # a probe bug must never stop a rollout
            log.warning("host telemetry: reading failed: %s", exc)
            return
        with self._lock:
            if self._fh is None:
                return
            try:
                self._fh.write(json.dumps(record, separators=(",", ":")) + "\n")
                self._fh.flush()
                self.samples += 1
            except OSError as exc:
                log.warning("host telemetry: cannot write %s: %s", self.path, exc)

    def read(self) -> dict[str, Any]:
        """The current reading as a record."""
        record: dict[str, Any] = {"wall_ns": time.time_ns(), "mono_ns": time.perf_counter_ns()}
        mem, note = read_meminfo()
        record["mem"] = {k: mem[k] for k in MEM_KEYS if k in mem}
        if note or "MemAvailable" not in mem:
            record["mem_note"] = note or "not available: /proc/meminfo has no MemAvailable (kernel older than 3.14)"
        total, used, note = read_shm()
        record["shm"] = {"total": total, "used": used}
        if note:
            record["shm_note"] = note
        stats, stats_note = read_diskstats() if self._devices else ({}, None)
        disks: dict[str, dict[str, Any]] = {}
        for root, (device, why) in self._devices.items():
            if device is None:
                disks[root] = {"note": why}
            elif device not in stats:
                disks[root] = {"device": device, "note": stats_note or f"not available: {device} is not in "
                               "/proc/diskstats"}
            else:
                rd, wr, busy = stats[device]
                disks[root] = {"device": device, "read_bytes": rd, "write_bytes": wr, "busy_ms": busy}
        record["disks"] = disks
        nvml = self._nvml
        if nvml is not None and nvml.handles:
            record["gpus"] = nvml.read()
        else:
            record["gpu_note"] = nvml.note if nvml is not None else "not available: not sampled"
        return record

    def _run(self) -> None:
        next_t = time.monotonic() + self.interval_s
        while not self._stop.wait(max(0.0, next_t - time.monotonic())):
            self.sample_now()
            next_t = max(next_t + self.interval_s, time.monotonic())


def scenario_disk_dirs(arms: Sequence[Any]) -> list[str]:
    """Every disk-tier ``root_dir`` of the scenario's arms (``Arm.fs_tiers()``), in order, without repeats."""
    return list(dict.fromkeys(t.root_dir for arm in arms for t in arm.fs_tiers()))
