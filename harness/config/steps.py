"""The ``steps`` section: warm-up and rising load levels inside each arm, and timing limits."""

from __future__ import annotations

from pydantic import Field, model_validator

from harness.config.base import StrictModel
from harness.config.search import SearchSpec
from harness.core.limits import MAX_CONCURRENCY, MAX_RATE_RPS, MAX_STEP_REQUESTS, MAX_STEP_S, MAX_THINK_S


class StepLevel(StrictModel):
    """One load level: closed-loop ``concurrency`` users or an open-loop Poisson ``rate_rps``."""

    concurrency: int | None = Field(default=None, ge=1, le=MAX_CONCURRENCY)
    rate_rps: float | None = Field(default=None, gt=0, le=MAX_RATE_RPS)
    duration_s: float | None = Field(default=None, gt=0, le=MAX_STEP_S)
    requests: int | None = Field(default=None, ge=1, le=MAX_STEP_REQUESTS)
    think_time_s: float = Field(default=0.0, ge=0, le=MAX_THINK_S, description="closed loop only: each user's pause "
                                "after its previous request ended")
    expected_rps: float | None = Field(default=None, gt=0, le=1_000_000, description="completed requests per "
                                       "second you expect at this level (per arm), for `harness plan`'s power "
                                       "estimate only; never changes the load")

    @model_validator(mode="after")
    def _one_driver(self) -> StepLevel:
        if (self.concurrency is None) == (self.rate_rps is None):
            raise ValueError("give exactly one of concurrency (closed loop) or rate_rps (open loop)")
        if self.duration_s is None and self.requests is None:
            raise ValueError("give duration_s, requests, or both (the step ends at whichever comes first)")
        if self.rate_rps is not None and self.think_time_s > 0:
            raise ValueError("think_time_s applies to closed-loop levels (concurrency) only: open-loop arrivals "
                             "(rate_rps) do not wait for answers; remove it (a session's turns use "
                             "workload.reuse.sessions.think_time_s)")
        return self

    @property
    def label(self) -> str:
        """Short human label, e.g. ``c16`` or ``r2.5``."""
        return f"c{self.concurrency}" if self.concurrency is not None else f"r{self.rate_rps:g}"

    @property
    def load(self) -> float:
        """The level's load figure (users or requests/s), for ordering."""
        return float(self.concurrency if self.concurrency is not None else self.rate_rps or 0.0)


class Warmup(StrictModel):
    """Requests sent after readiness and before the first step; excluded from every statistic."""

    duration_s: float = Field(default=0.0, ge=0, le=3600)
    requests: int = Field(default=0, ge=0, le=1_000_000)
    concurrency: int = Field(default=1, ge=1, le=10_000)


class SequentialSpec(StrictModel):
    """Sequential steps: a step may end at a look once every decision at the step is settled, at error rates fixed in
    advance (each test's error is divided by ``looks``: a Bonferroni group-sequential design). The baseline's step
    ends once the percentiles the comparisons use are resolved; its A/A re-run always runs its full duration."""

    enabled: bool = False
    looks: int = Field(default=4, ge=2, le=20, description="analyses per step, the last at the planned duration")
    min_fraction: float = Field(default=0.25, gt=0, lt=1, description="the first look, as a share of the duration")

    def fractions(self) -> list[float]:
        """The looks as shares of the planned duration (the last is 1.0)."""
        step = (1.0 - self.min_fraction) / (self.looks - 1)
        return [round(self.min_fraction + i * step, 6) for i in range(self.looks)]


class StepsSpec(StrictModel):
    """Load levels (rising), warm-up and timing limits."""

    warmup: Warmup = Field(default_factory=Warmup)
    sequential: SequentialSpec = Field(default_factory=SequentialSpec)
    levels: list[StepLevel] = Field(min_length=1)
    search: SearchSpec | None = Field(default=None, description="capacity at SLO: a probe search per arm after "
                                      "its fixed steps (harness/config/search.py)")
    scrape_interval_s: float = Field(default=2.0, ge=0.1, le=600)
    request_timeout_s: float = Field(default=300.0, gt=0, le=7200)
    stream_idle_timeout_s: float = Field(default=30.0, gt=0, le=3600, description="a stream silent this long "
                                         "ends as a 'stalled' error")
    drain_timeout_s: float = Field(default=30.0, ge=0, le=3600, description="how long in-flight requests may "
                                   "finish after a step's time is up")

    @model_validator(mode="after")
    def _levels_rise(self) -> StepsSpec:
        for i in range(1, len(self.levels)):
            prev, cur = self.levels[i - 1], self.levels[i]
            if (prev.concurrency is None) != (cur.concurrency is None):
                raise ValueError(f"levels[{i}] mixes closed-loop and open-loop levels; use one kind per scenario")
            if cur.load < prev.load:
                raise ValueError(f"levels[{i}] ({cur.label}) is lower than levels[{i - 1}] ({prev.label}); "
                                 "steps must rise")
        search = self.search
        if search is not None and self.search_kind == "concurrency" and (search.low != int(search.low)
                                                                        or search.high != int(search.high)):
            raise ValueError("search: low and high are users (a closed-loop search): give whole numbers")
        if search is not None and self.search_kind == "concurrency" and search.high > MAX_CONCURRENCY:
            raise ValueError(f"search.high ({search.high:g}) is above {MAX_CONCURRENCY:,} users, the most one step "
                             "(a capacity probe) can run: lower it")
        if search is not None and self.search_kind == "rate" and search.think_time_s > 0:
            raise ValueError("search.think_time_s applies to a closed-loop search (kind: concurrency) only: a rate "
                             "search's arrivals do not wait for answers; remove it")
        return self

    @property
    def search_kind(self) -> str:
        """What the capacity search varies: ``search.kind``, else the kind of ``levels``."""
        if self.search is not None and self.search.kind is not None:
            return self.search.kind
        return "concurrency" if self.levels[0].concurrency is not None else "rate"

    def planned_duration_s(self) -> float:
        """Planned seconds of load per arm (duration-bounded levels only), warm-up included."""
        return self.warmup.duration_s + sum(level.duration_s or 0.0 for level in self.levels)
