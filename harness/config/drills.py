"""The ``drills`` section: tier drills run on a tiered arm after its steps (cache loss, restart, bursts, pressure)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

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
    burst_requests: int = Field(default=32, ge=1, le=100_000,
                                description="promotion_burst only: requests at once")
    fill_gib: float | None = Field(default=None, gt=0, le=100_000, description="storage_pressure only: bytes to "
                                   "write")
    read_slowdown: float | None = Field(default=None, ge=1, le=1000, description="storage_pressure only: throttle")
    max_error_rate: float = Field(default=0.0, ge=0, le=1)
    max_ttft_p99_ms: float | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _fields_of_its_kind(self) -> Drill:
        if self.kind != "promotion_burst" and self.changed_fields(["burst_requests"]):
            raise ValueError(f"burst_requests applies to promotion_burst drills only, not {self.kind}: remove it")
        if self.kind != "storage_pressure":
            given = [name for name in ("fill_gib", "read_slowdown") if getattr(self, name) is not None]
            if given:
                verb, them = ("applies", "it") if len(given) == 1 else ("apply", "them")
                raise ValueError(f"{' and '.join(given)} {verb} to storage_pressure drills only, not {self.kind}: "
                                 f"remove {them}")
        elif self.fill_gib is None and self.read_slowdown is None:
            raise ValueError("a storage_pressure drill needs fill_gib (a filler file in the disk tier's file system) "
                             "and/or read_slowdown (the simulator's disk reads throttled): with neither it does "
                             "nothing")
        return self
