"""The ``drills`` section: tier drills run on a tiered arm after its steps (cache loss, restart, bursts, pressure)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harness.config.base import StrictModel

DrillKind = Literal["cache_loss", "restart", "promotion_burst", "storage_pressure"]


class Drill(StrictModel):
    """One drill: load before, the disruption, load after; judged against error and latency limits."""

    kind: DrillKind
    arm: str | None = Field(default=None, description="arm to drill; default: the first tiered arm")
    concurrency: int = Field(default=4, ge=1, le=10_000)
    before_s: float = Field(default=10.0, ge=0, le=3600)
    during_s: float = Field(default=10.0, ge=0, le=3600)
    after_s: float = Field(default=10.0, ge=0, le=3600)
    burst_requests: int = Field(default=32, ge=1, le=100_000, description="promotion_burst: requests at once")
    fill_gib: float | None = Field(default=None, gt=0, le=100_000, description="storage_pressure: bytes to write")
    read_slowdown: float | None = Field(default=None, ge=1, le=1000, description="storage_pressure: throttle")
    max_error_rate: float = Field(default=0.0, ge=0, le=1)
    max_ttft_p99_ms: float | None = Field(default=None, gt=0)
