"""Capacity at SLO (``summary.json``: ``capacity``): each probe of the search, each arm's capacity, the section."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harness.schema.base import SchemaModel as _Model
from harness.schema.intervals import QuantileCI


class CapacityProbe(_Model):
    """One probe of the capacity search: its load, sample and percentile interval against the budget."""

    step: int  # its steps.jsonl index (harness.decision.capacity.probe_index)
    label: str
    load: float
    requests: int = 0
    errors: int = 0
    n: int = 0  # samples of the percentile (ITL: the requests)
    duration_s: float = 0.0
    value_ms: float | None = None
    ci: QuantileCI | None = None
    outcome: Literal["meets", "breaks", "unresolved"]
    extended: bool = False  # the re-run of an unresolved probe, longer
    reason: str = ""
    client_saturated: bool = False  # the load generator could not keep up: latencies include client delay


class CapacityArm(_Model):
    """One arm's capacity at the SLO: the highest probed load whose percentile interval met the budget."""

    arm: str
    status: Literal["found", "at-least-high", "none-met", "not-run"]
    capacity: float | None = None  # None: no probed load met
    not_met: float | None = None  # the lowest probed load that did not meet
    complete: bool = False  # the bracket reached the resolution (or an end of the range)
    message: str = ""
    probes: list[CapacityProbe] = Field(default_factory=list)


class CapacitySection(_Model):
    """Capacity at SLO (``steps.search``): per arm and tier against baseline. It informs; the verdict's rules do not
    read it."""

    metric: str
    percentile: float
    budget_ms: float
    kind: Literal["concurrency", "rate"]
    low: float
    high: float
    confidence: float = 0.95
    arms: list[CapacityArm] = Field(default_factory=list)
    comparison: list[str] = Field(default_factory=list)  # tier against baseline, in words
    note: str = ""
