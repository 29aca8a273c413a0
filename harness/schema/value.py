"""What the tier is worth (``summary.json``: ``value``; only with the scenario's ``value:`` section): per arm the
capacity per server in the demand's unit, GPUs needed for the demand, and for tier arms GPUs saved against the
baseline, the tier's cost and its value per GiB — every figure with its interval and its source."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harness.schema.base import SchemaModel as _Model


class Figure(_Model):
    """One figure with its interval and where it came from.

    ``value`` None: no point estimate (the measure did not bound it); ``lo``/``hi`` None: unbounded on that side.
    ``confidence`` None: the interval is a search bracket, not a confidence interval (``source`` says how each end
    was judged)."""

    value: float | None = None
    lo: float | None = None
    hi: float | None = None
    unit: str
    confidence: float | None = None
    source: str


class ArmValue(_Model):
    """One arm: capacity per server, GPUs needed, and for a tier arm what it saves and what its tier costs."""

    arm: str
    tier: Literal["gpu-only", "cpu", "tiered"]
    gpus_per_server: int
    capacity: Figure | None = None  # per server, in the section's demand unit; None: not measured (see note)
    gpus_needed: Figure | None = None
    gpu_cost_per_month: Figure | None = None
    gpus_saved: Figure | None = None  # baseline needed - this arm needed (tier arms)
    host_tier_gib: float = 0.0  # per server (each server of the arm carries its own tier)
    nvme_tier_gib: float | None = 0.0  # per server; None: a disk tier without a size
    tier_gib_source: str = ""
    tier_cost_per_month: Figure | None = None  # the fleet's: servers needed x per-server tier cost; None: unknown
    net_saving_per_month: Figure | None = None  # GPU cost saved - tier cost
    value_per_tier_gib_month: Figure | None = None  # net saving over the fleet's tier GiB
    notes: list[str] = Field(default_factory=list)  # why a figure is absent, caveats


class ValueSection(_Model):
    """The ``value:`` section's inputs and each arm's figures. It informs; the verdict's rules do not read it."""

    demand: float
    demand_unit: Literal["requests/s", "output tokens/s"]
    gpu_hour_cost: float
    host_memory_gib_month_cost: float | None = None
    nvme_gib_month_cost: float | None = None
    currency: str = "USD"
    hours_per_month: float = 730.0
    capacity_from: Literal["search", "step-goodput"]
    confidence: float  # the level of each arm's throughput intervals
    method: str = ""  # how the intervals were made and combined
    arms: list[ArmValue] = Field(default_factory=list)
    summary: list[str] = Field(default_factory=list)  # each tier arm in one sentence
    note: str = ""
