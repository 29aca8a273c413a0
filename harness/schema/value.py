"""What the tier is worth (``summary.json``: ``value``; only with the scenario's ``value:`` section): per arm the
per-server throughput in the demand's unit (capacity at the SLO from a capacity search, else the goodput of the best
fixed step: ``capacity_basis`` says which), GPUs needed for the demand, and for tier arms GPUs saved against the
baseline, the tier's cost and its value per GiB, and the same against the arm without its newest tier (``marginal``)
— every figure with its interval, its level and its source."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harness.schema.base import SchemaModel as _Model

CapacityBasis = Literal["search", "step-goodput"]
"""What the per-server figure is: ``search`` — capacity at the SLO from the capacity search (``steps.search``), a
bracket; ``step-goodput`` — the throughput of requests meeting every SLO at the fixed step where it was highest (not
a capacity: at the arm's highest step it may understate what the server holds)."""


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


class MarginalValue(_Model):
    """A tier arm against the arm without its newest tier (``versus``: the arm its earns-its-keep rule compares with;
    the baseline for the first tier arm): what the newest tier adds. Each figure may be negative (never clipped)."""

    versus: str
    gpus_saved: Figure | None = None  # versus needed - this arm needed
    added_host_gib: float | None = None  # per server: this arm's host GiB - versus's (None: unknown)
    added_nvme_gib: float | None = None  # per server: this arm's NVMe GiB - versus's (None: a disk tier without size)
    tier_cost_per_month: Figure | None = None  # this arm's fleet tier cost - versus's fleet tier cost
    net_saving_per_month: Figure | None = None  # GPU cost saved against versus - the change in tier cost
    value_per_tier_gib_month: Figure | None = None  # net saving over this fleet's GiB of the added tier
    notes: list[str] = Field(default_factory=list)  # why a figure is absent


class ArmValue(_Model):
    """One arm: per-server throughput, GPUs needed, and for a tier arm what it saves and what its tier costs."""

    arm: str
    tier: Literal["gpu-only", "cpu", "tiered"]
    gpus_per_server: int
    capacity: Figure | None = None  # per server, in the section's demand unit; None: not measured (see note)
    capacity_basis: CapacityBasis | None = None  # what ``capacity`` is (None: not measured, or a summary before it)
    capacity_step: str | None = None  # step-goodput: the label of the fixed step it came from
    capacity_at_top_step: bool = False  # step-goodput at the arm's highest step: it may understate capacity
    gpus_needed: Figure | None = None
    gpu_cost_per_month: Figure | None = None
    gpus_saved: Figure | None = None  # baseline needed - this arm needed (tier arms)
    host_tier_gib: float = 0.0  # per server (each server of the arm carries its own tier)
    nvme_tier_gib: float | None = 0.0  # per server; None: a disk tier without a size
    tier_gib_source: str = ""
    tier_cost_per_month: Figure | None = None  # the fleet's: servers needed x per-server tier cost; None: unknown
    net_saving_per_month: Figure | None = None  # GPU cost saved - tier cost
    value_per_tier_gib_month: Figure | None = None  # net saving over the fleet's tier GiB
    marginal: MarginalValue | None = None  # against the arm without its newest tier (tier arms)
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
    capacity_from: CapacityBasis
    confidence: float  # the level of each arm's own intervals (1 - alpha/2): throughput, GPUs needed, costs
    pair_confidence: float | None = None  # the level of figures from two arms (1 - alpha): saved, net, per GiB
    method: str = ""  # how the intervals were made and combined
    arms: list[ArmValue] = Field(default_factory=list)
    summary: list[str] = Field(default_factory=list)  # each tier arm in one sentence
    note: str = ""
