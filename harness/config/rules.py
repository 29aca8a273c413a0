"""The ``slo`` and ``rules`` sections: latency budgets, baseline comparison and the 'earns its keep' rule."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from harness.config.base import StrictModel
from harness.config.text import Name

LatencyMetric = Literal["ttft", "itl", "e2e"]
# The percentiles a budget can be judged at: every window and every step computes these (harness.analysis).
BUDGET_PERCENTILES = (50.0, 95.0, 99.0)
KeepMeasure = Literal[
    "ttft_p50", "ttft_p95", "ttft_p99", "itl_p95", "itl_p99", "e2e_p95", "e2e_p99",
    "output_tokens_per_s", "goodput",
]
# Once accepted, never judged: the hit rate has no per-request sample to put an interval on, so as a measure it was
# always unresolved, widened the family and kept the rule from concluding.
_NO_INTERVAL = {"hit_rate": "the hit rate comes from server counters, with no per-request sample to put an interval "
                            "on, so it can never be shown to improve"}


def _judged_measures(value: object) -> object:
    """Refuse a measure no interval can be put on, naming why (before the Literal check's generic message)."""
    if isinstance(value, list):
        for item in value:
            if isinstance(item, str) and item in _NO_INTERVAL:
                raise ValueError(f"{item}: {_NO_INTERVAL[item]}; use latency percentiles, output_tokens_per_s or "
                                 "goodput (the report shows the hit rate per step anyway)")
    return value


class SloSpec(StrictModel):
    """Service-level objectives in milliseconds (p99 unless named otherwise); used for goodput and as defaults."""

    ttft_p99_ms: float | None = Field(default=None, gt=0, le=3_600_000)
    itl_p99_ms: float | None = Field(default=None, gt=0, le=3_600_000)
    e2e_p99_ms: float | None = Field(default=None, gt=0, le=86_400_000)

    def budget_ms(self, metric: LatencyMetric) -> float | None:
        """The SLO budget for a latency metric, if set."""
        return {"ttft": self.ttft_p99_ms, "itl": self.itl_p99_ms, "e2e": self.e2e_p99_ms}[metric]


class BudgetRule(StrictModel):
    """Roll back when windowed percentile latency breaks its budget for a sustained period."""

    name: Name | None = None
    metric: LatencyMetric
    percentile: float = Field(default=99.0, description="the percentile each window (and each step) is judged at: "
                              "50, 95 or 99, the percentiles the windows and steps compute")
    budget_ms: float | None = Field(default=None, gt=0, description="default: the slo section's p99 budget (a p99 "
                                    "rule only; a p50 or p95 rule names its own)")
    breach_windows: int = Field(default=3, ge=1, le=10_000, description="N breached windows ...")
    of_last: int = Field(default=5, ge=1, le=10_000, description="... out of the last M windows")
    critical: bool = Field(default=False, description="a sustained breach vetoes the arm on its own")
    dry_run: bool = Field(default=False, description="reported, never decides")
    arms: list[str] | None = Field(default=None, description="arms the rule applies to (default: every arm)")

    @field_validator("percentile")
    @classmethod
    def _computed(cls, value: float) -> float:
        if value not in BUDGET_PERCENTILES:
            raise ValueError("use 50, 95 or 99: a budget is judged at a percentile every window and step "
                             "computes")
        return value

    @model_validator(mode="after")
    def _n_of_m(self) -> BudgetRule:
        if self.breach_windows > self.of_last:
            raise ValueError(f"breach_windows ({self.breach_windows}) cannot exceed of_last ({self.of_last})")
        if self.percentile != 99.0 and self.budget_ms is None:
            raise ValueError(f"a p{self.percentile:g} budget needs its own budget_ms: the slo section's budgets "
                             "are p99 budgets")
        return self

    @property
    def label(self) -> str:
        """Rule name for reports."""
        return self.name or f"{self.metric}-p{self.percentile:g}-budget"


class RegressionRule(StrictModel):
    """Compare an arm with the baseline at the same step, at the rule's percentile: an interval on the ratio of the
    two percentiles (paired by request where the plans match) must stay under ``max_ratio`` (pass) or clear it
    (breach); Mann-Whitney U on the whole distribution is reported as a second view and never decides."""

    name: Name | None = None
    metric: LatencyMetric
    percentile: float = Field(default=99.0, gt=0, lt=100, description="the percentile whose ratio is limited")
    max_ratio: float = Field(default=1.1, ge=1.0, le=100.0, description="allowed arm/baseline ratio")
    alpha: float = Field(default=0.05, gt=0, lt=1, description="one-sided error of a breach (and of a pass), "
                         "shared by the rule's steps (Bonferroni)")
    min_samples: int = Field(default=30, ge=3, le=10_000_000)
    critical: bool = False
    dry_run: bool = False
    arms: list[str] | None = Field(default=None, description="arms the rule applies to (default: every tier arm)")

    @property
    def label(self) -> str:
        """Rule name for reports."""
        return self.name or f"{self.metric}-p{self.percentile:g}-vs-baseline"


def _default_measures() -> list[KeepMeasure]:
    # Not the hit rate (nor could it be, see _NO_INTERVAL): retaining more without helping latency or throughput is
    # exactly what a tier that does not earn its keep does.
    return ["ttft_p95", "output_tokens_per_s"]


class EarnsKeepRule(StrictModel):
    """A tier must improve at least one measure by ``min_improvement`` at some step, shown by the improvement's
    one-sided interval clearing it with the family of steps x measures controlled (Holm; for "at least one" this
    is Bonferroni at ``alpha / family``); otherwise the arm is ``hold``."""

    measures: list[KeepMeasure] = Field(default_factory=_default_measures, min_length=1)
    min_improvement: float = Field(default=1.05, ge=1.0, le=100.0, description="ratio, e.g. 1.05 = 5% better")
    min_samples: int = Field(default=30, ge=1, le=10_000_000)
    alpha: float = Field(default=0.05, gt=0, lt=1, description="family-wise error of a false 'earns its keep'")

    _measures = field_validator("measures", mode="before")(_judged_measures)


def _floor_measures() -> list[KeepMeasure]:
    return ["ttft_p50", "ttft_p95", "output_tokens_per_s"]


class NoiseFloorSpec(StrictModel):
    """Re-run the baseline at the end of the run (A/A) and decide only on effects above the drift it shows."""

    rerun_baseline: bool = Field(default=False, description="run the baseline's configuration again, last")
    measures: list[KeepMeasure] = Field(default_factory=_floor_measures, min_length=1)

    _measures = field_validator("measures", mode="before")(_judged_measures)


class HostContentionSpec(StrictModel):
    """When a step's figures are the host's, not the engine's: a step over this budget never decides a verdict, and
    an A/A step over it does not set the noise floor (:mod:`harness.decision.rules.load_host`)."""

    max_sim_behind_share: float = Field(default=0.05, gt=0, le=1.0, description="a simulated step whose simulator "
                                        "fell behind the wall clock by more than this share of the step's duration "
                                        "(its own CPU on the host, not modelled physics) is host-contended")
    client_saturation: bool = Field(default=True, description="a step whose load generator was saturated (CPU, "
                                    "send lag or first-token client delay over the load section's limits) is "
                                    "host-contended")


class TierHealthRule(StrictModel):
    """Name a tier that drops stores or fails promotions under load (vLLM's tier-health counters, per step)."""

    max_dropped_stores: int = Field(default=0, ge=0, description="per step: stores dropped under back-pressure "
                                    "plus failed store allocations")
    max_failed_promotions: int = Field(default=0, ge=0, description="per step: failed promotion jobs plus "
                                       "promotions that could not allocate CPU-tier space")
    max_failed_cascades: int = Field(default=0, ge=0, description="per step: failed cascade jobs (CPU -> tier)")
    action: Literal["warn", "veto"] = Field(default="warn", description="warn: reported, never decides; veto: "
                                            "the arm is no-go")


class RulesSpec(StrictModel):
    """All rollback and decision rules."""

    confidence: float = Field(default=0.95, ge=0.5, lt=1.0, description="level of every interval the harness "
                              "reports")
    window_s: float = Field(default=10.0, ge=0.5, le=86_400)
    min_requests_per_window: int = Field(default=5, ge=1, le=1_000_000)
    max_error_rate: float = Field(default=0.01, ge=0, le=1, description="an arm whose error rate at a step exceeds "
                                  "this while the arm before it stayed within it is no-go (the tier causes failures)")
    budgets: list[BudgetRule] = Field(default_factory=list)
    regression: list[RegressionRule] = Field(default_factory=list)
    earns_keep: EarnsKeepRule | None = Field(default_factory=EarnsKeepRule)
    tier_health: TierHealthRule | None = Field(default_factory=TierHealthRule)
    noise_floor: NoiseFloorSpec = Field(default_factory=NoiseFloorSpec)
    host_contention: HostContentionSpec = Field(default_factory=HostContentionSpec)
    require_own_tier_hits: bool = Field(default=True, description="a tier whose own tier served no hits at any "
                                        "step cannot be go (no causal path for an improvement)")
    fit_screen_decides: bool = Field(default=True, description="fit-screen warnings (prefixes do not come back, "
                                     "GPU memory is not the limit) hold a tier that would otherwise be go")
