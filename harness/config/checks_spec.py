"""The ``checks`` section: how strict pre-flight checks are and what the host must keep for itself."""

from __future__ import annotations

from pydantic import Field

from harness.config.base import StrictModel


class ChecksSpec(StrictModel):
    """Settings for :mod:`harness.plan.checks`."""

    host_reserve_gib: float = Field(default=8.0, ge=0, le=100_000, description="host memory kept for the OS, "
                                    "runtime, page cache of the disk tier and colocated services")
    disk_reserve_gib: float = Field(default=10.0, ge=0, le=1_000_000, description="free disk kept beside a disk tier")
    allow_unpinned: bool = Field(default=False, description="accept images without a pinned version tag")
    allow_weight_offload: bool = Field(default=False, description="accept --cpu-offload-gb (weight offload)")
    kv_bytes_per_token: int | None = Field(default=None, ge=1, le=1 << 30, description="KV bytes per token of the "
                                           "model (2 x layers x KV heads x head dim x dtype bytes), for the fit "
                                           "screen's promotion-cost estimate")
    host_to_device_gbps: float = Field(default=25.0, gt=0, le=10_000, description="effective host-to-GPU GB/s "
                                       "(PCIe Gen4 x16 ~25, Gen5 ~50)")
