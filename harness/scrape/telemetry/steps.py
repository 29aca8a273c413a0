"""Raw host readings (``metrics/<arm>/host.jsonl``) -> one :class:`~harness.schema.host_telemetry.HostStep` per step.

Levels (memory available, page cache, ``/dev/shm``, GPU memory and utilisation) use the readings inside the step (or
the two that bracket it when none fall inside); disk throughput and busy time are differences of the cumulative
counters between the reading at/before the step's start and the one at/after its end, like the scrapes' counters.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise
from pathlib import Path
from statistics import fmean
from typing import Any

from harness.core.jsonl import read_objects
from harness.rundir.entries import StepEntry
from harness.rundir.layout import HOST_FILE
from harness.schema.host_telemetry import DiskDeviceStep, GpuStep, HostStep
from harness.schema.summary import StepSummary

Record = dict[str, Any]


def load_readings(metrics_dir: Path) -> list[Record]:
    """The readings of one arm in monotonic order ([] when the file is absent)."""
    rows = [r for r in read_objects(metrics_dir / HOST_FILE) if isinstance(r.get("mono_ns"), int)]
    return sorted(rows, key=lambda r: int(r["mono_ns"]))


def _bracket(rows: Sequence[Record], start_ns: int, end_ns: int) -> tuple[list[Record], list[Record]]:
    """(readings inside the step, readings from the last at/before start to the first at/after end)."""
    inside = [r for r in rows if start_ns <= r["mono_ns"] <= end_ns]
    before = [r for r in rows if r["mono_ns"] <= start_ns][-1:]
    after = [r for r in rows if r["mono_ns"] >= end_ns][:1]
    span = list({id(r): r for r in [*before, *inside, *after]}.values())
    return inside, span


def _values(rows: Iterable[Record], section: str, key: str) -> list[float]:
    out = []
    for r in rows:
        value = (r.get(section) or {}).get(key)
        if isinstance(value, int | float):
            out.append(float(value))
    return out


def _disk(root: str, span: Sequence[Record]) -> DiskDeviceStep:
    rows = [r for r in span if isinstance((r.get("disks") or {}).get(root), dict)]
    entries = [(int(r["mono_ns"]), r["disks"][root]) for r in rows]
    counted = [(t, e) for t, e in entries if "busy_ms" in e]
    device = next((e.get("device") for _t, e in entries if e.get("device")), None)
    if len(counted) < 2:
        note = next((e.get("note") for _t, e in entries if e.get("note")), None)
        return DiskDeviceStep(root_dir=root, device=device, note=note or "not available: fewer than two readings "
                              "of the device in this step")
    (t0, first), (t1, last) = counted[0], counted[-1]
    seconds = (t1 - t0) / 1e9
    if seconds <= 0:
        return DiskDeviceStep(root_dir=root, device=device, note="not available: readings without elapsed time")
    busiest = max(min(1.0, (b["busy_ms"] - a["busy_ms"]) / max((tb - ta) / 1e6, 1e-9))
                  for (ta, a), (tb, b) in pairwise(counted))
    return DiskDeviceStep(root_dir=root, device=device,
                          read_bytes_per_s=max(0.0, (last["read_bytes"] - first["read_bytes"]) / seconds),
                          write_bytes_per_s=max(0.0, (last["write_bytes"] - first["write_bytes"]) / seconds),
                          busy_share=min(1.0, max(0.0, (last["busy_ms"] - first["busy_ms"]) / (seconds * 1e3))),
                          busy_share_max=max(0.0, busiest))


def _gpus(rows: Sequence[Record]) -> list[GpuStep]:
    by_index: dict[int, list[Record]] = {}
    for r in rows:
        for g in r.get("gpus") or []:
            if isinstance(g, dict) and isinstance(g.get("index"), int):
                by_index.setdefault(g["index"], []).append(g)
    out = []
    for index, readings in sorted(by_index.items()):
        def nums(key: str, readings: list[Record] = readings) -> list[float]:
            return [float(g[key]) for g in readings if isinstance(g.get(key), int | float)]
        used, total, util = nums("mem_used"), nums("mem_total"), nums("util")
        rx, tx = nums("pcie_rx"), nums("pcie_tx")
        out.append(GpuStep(index=index, name=readings[-1].get("name"),
                           memory_total_bytes=int(max(total)) if total else None,
                           memory_used_max_bytes=int(max(used)) if used else None,
                           utilization_mean=fmean(util) if util else None, utilization_max=max(util) if util else None,
                           pcie_rx_bytes_per_s_mean=fmean(rx) if rx else None,
                           pcie_tx_bytes_per_s_mean=fmean(tx) if tx else None))
    return out


def host_step(rows: Sequence[Record], start_ns: int, end_ns: int) -> HostStep | None:
    """The host over one step, or None when no reading brackets or falls inside it."""
    inside, span = _bracket(rows, start_ns, end_ns)
    if not span:
        return None
    levels = inside or span
    notes: dict[str, None] = {}
    for r in span:
        for key in ("mem_note", "shm_note"):
            if r.get(key):
                notes.setdefault(str(r[key]), None)
    avail, cached = _values(levels, "mem", "MemAvailable"), _values(levels, "mem", "Cached")
    total = _values(levels, "mem", "MemTotal")
    shm_used, shm_total = _values(levels, "shm", "used"), _values(levels, "shm", "total")
    roots = list(dict.fromkeys(k for r in span for k in (r.get("disks") or {})))
    gpus = _gpus(levels)
    gpu_note = None if gpus else next((str(r["gpu_note"]) for r in span if r.get("gpu_note")),
                                      "not available: no GPU reading in this step")
    return HostStep(samples=len(inside), mem_total_bytes=int(max(total)) if total else None,
                    mem_available_min_bytes=int(min(avail)) if avail else None,
                    mem_available_mean_bytes=fmean(avail) if avail else None,
                    page_cache_max_bytes=int(max(cached)) if cached else None,
                    shm_total_bytes=int(max(shm_total)) if shm_total else None,
                    shm_used_max_bytes=int(max(shm_used)) if shm_used else None,
                    disks=[_disk(root, span) for root in roots], gpus=gpus, gpu_note=gpu_note, notes=list(notes))


def with_host(metrics_dir: Path, steps: Sequence[StepSummary], spans: Mapping[int, StepEntry]
              ) -> list[StepSummary]:
    """The steps, each with a journaled span (its ``steps.jsonl`` entry) given its ``host`` telemetry from the
    readings (copies; steps without a span or readings as they were)."""
    rows = load_readings(metrics_dir)
    if not rows:
        return list(steps)
    return [step.model_copy(update={"host": host_step(rows, span.start_ns, span.end_ns)})
            if (span := spans.get(step.index)) is not None else step for step in steps]
