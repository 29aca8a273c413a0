"""Per-step host figures (``summary.json``: ``steps[].host``). ``None`` = not measured; ``notes`` say why.

Nothing here is ever 0 for "unknown": a figure that could not be read is ``None`` and its reason is in ``notes``
(host-wide) or the device's ``note`` (a disk-tier device, the GPUs).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DiskDeviceStep(_Model):
    """The block device under one disk-tier ``root_dir`` over one step (from ``/proc/diskstats``)."""

    root_dir: str
    device: str | None = None  # e.g. nvme0n1p1
    read_bytes_per_s: float | None = None
    write_bytes_per_s: float | None = None
    busy_share: float | None = None  # io_ticks over the step / step time (0..1): "%util"
    busy_share_max: float | None = None  # the busiest sampling interval
    note: str | None = None  # why figures are None


class GpuStep(_Model):
    """One GPU over one step (NVML)."""

    index: int
    name: str | None = None
    memory_total_bytes: int | None = None
    memory_used_max_bytes: int | None = None
    utilization_mean: float | None = None  # 0..1, NVML's "GPU busy" share
    utilization_max: float | None = None
    pcie_rx_bytes_per_s_mean: float | None = None  # host -> GPU (NVML samples over 20 ms)
    pcie_tx_bytes_per_s_mean: float | None = None  # GPU -> host


class HostStep(_Model):
    """Host state while one step ran (sampled by the harness, every scrape interval)."""

    samples: int = 0
    mem_total_bytes: int | None = None
    mem_available_min_bytes: int | None = None
    mem_available_mean_bytes: float | None = None
    page_cache_max_bytes: int | None = None  # Cached (page cache, tmpfs included)
    shm_total_bytes: int | None = None  # /dev/shm size
    shm_used_max_bytes: int | None = None
    disks: list[DiskDeviceStep] = Field(default_factory=list)
    gpus: list[GpuStep] = Field(default_factory=list)
    gpu_note: str | None = None  # "not available: <reason>" when there are no GPU figures
    notes: list[str] = Field(default_factory=list)  # every figure that is not available, with the reason
