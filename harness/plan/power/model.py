"""The power section of ``harness plan`` as data (``Plan.power`` in ``--json``): where each step's throughput came
from, how many requests each step and budget window should hold, which percentiles they resolve, and the smallest
effect each rule can detect."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

RateSource = Literal["declared", "measured", "calibrated", "offered", "requests", "none"]
RuleKind = Literal["regression", "earns_keep", "budget"]


class LevelRate(BaseModel):
    """Completed requests per second expected at one level (per arm), and where the figure came from."""

    model_config = ConfigDict(extra="forbid")
    rps: float | None
    source: RateSource
    detail: str


class Throughput(BaseModel):
    """Rates measured outside the scenario (a previous run, or the simulator), by level label (``c8``, ``r2.5``),
    and the latency spread seen there (lognormal sigma by metric)."""

    model_config = ConfigDict(extra="forbid")
    source: Literal["measured", "calibrated"]
    detail: str
    by_label: dict[str, LevelRate]
    sigma: dict[str, float] = Field(default_factory=dict, description="lognormal sigma by metric (ttft/itl/e2e)")


class PowerInput(BaseModel):
    """What ``harness plan`` was told beyond the scenario (``--from-run``, ``--calibrate``, ``--sigma``)."""

    model_config = ConfigDict(extra="forbid")
    measured: Throughput | None = None
    calibrated: Throughput | None = None
    sigma: float | None = Field(default=None, gt=0, description="declared lognormal sigma (--sigma)")
    power: float = Field(default=0.8, gt=0.5, lt=1.0)


class PercentileResolution(BaseModel):
    """Can ``n`` requests resolve this percentile at ``confidence`` (two-sided, order statistics)?"""

    model_config = ConfigDict(extra="forbid")
    percentile: float
    confidence: float
    needed: int = Field(description="requests that just resolve it")
    resolved: bool | None = Field(description="None: the step's request count is unknown")
    ranks: tuple[int, int] | None = Field(default=None, description="1-based ranks of the interval's ends")
    sample_percentiles: tuple[float, float] | None = Field(
        default=None, description="the interval as sample percentiles: the true percentile lies between these")


class RuleResolution(BaseModel):
    """One rule at one step: can the step's requests settle it at the rule's test level, and what can it detect."""

    model_config = ConfigDict(extra="forbid")
    rule: str
    kind: RuleKind
    measure: str
    percentile: float | None
    alpha_each: float | None = Field(description="one-sided error of one test (family and looks divided out)")
    confidence: float = Field(description="the two-sided interval the test reads (1 - 2 alpha_each)")
    needed: int
    resolved: bool | None
    ranks: tuple[int, int] | None = None
    sample_percentiles: tuple[float, float] | None = None
    limit: float | None = Field(default=None, description="max_ratio (regression) or min_improvement (keep)")
    deciding: bool = Field(default=True, description="false for a dry-run rule: reported, never decides")
    detectable_ratio: float | None = Field(default=None, description="lognormal: the smallest true ratio the test "
                                           "flags with the plan's power")
    pass_limit: float | None = Field(default=None, description="lognormal: the smallest limit an unchanged arm "
                                     "passes with the plan's power (regression)")
    duration_needed_s: float | None = Field(default=None, description="the step duration that would resolve it")
    lower_percentile: float | None = Field(default=None, description="the highest percentile the step resolves")
    note: str | None = None


class WindowBound(BaseModel):
    """Whether a budget window can bound one budget percentile from above (its two-sided interval resolves)."""

    model_config = ConfigDict(extra="forbid")
    percentile: float
    needed: int = Field(description="requests a window needs to resolve it")
    bounds: bool | None = Field(description="None: the window's request count is unknown")


class WindowResolution(BaseModel):
    """Requests in one budget window and whether a window can bound each budget's percentile from above."""

    model_config = ConfigDict(extra="forbid")
    window_s: float
    requests: float | None
    needed_p99: int = Field(description="p99 (every window has it): the requests that resolve it")
    bounds_p99: bool | None
    percentiles: list[WindowBound] = Field(default_factory=list, description="one per percentile the budget rules "
                                           "are judged at, ascending")

    def bound(self, percentile: float | None) -> WindowBound | None:
        """The entry for one budget percentile, if a budget is judged at it."""
        return next((b for b in self.percentiles if b.percentile == percentile), None)


class StepPower(BaseModel):
    """One step's expected sample and what it resolves."""

    model_config = ConfigDict(extra="forbid")
    index: int
    label: str
    duration_s: float | None
    rps: float | None
    source: RateSource
    source_detail: str
    expected_requests: int | None
    percentiles: list[PercentileResolution]
    rules: list[RuleResolution]
    window: WindowResolution | None


class PowerPlan(BaseModel):
    """Power before the run: requests per step and window, resolvable percentiles, smallest detectable effects."""

    model_config = ConfigDict(extra="forbid")
    confidence: float = Field(description="rules.confidence: the level of every reported interval")
    looks: int = Field(description="sequential looks per step (tests divide their error by it); 1 = fixed horizon")
    power: float = Field(description="probability of detection the lognormal figures are computed for")
    method: str
    assumption: str = Field(description="the model behind detectable_ratio / pass_limit, named")
    sigma: dict[str, float] = Field(description="lognormal sigma by metric")
    sigma_source: str
    known: bool = Field(description="at least one step's request count is known")
    how_to_estimate: str | None = None
    steps: list[StepPower]
    notes: list[str] = Field(default_factory=list)
