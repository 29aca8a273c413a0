"""The ``steps.search`` section: a capacity search per arm — the highest load whose percentile meets an SLO budget.

After an arm's fixed steps (``steps.levels``) and before its drills, probes of ``probe_duration_s`` rise from
``low`` (times ``growth`` each) until one does not meet the budget or ``high`` is reached, then bisect the bracket
down to ``resolution`` (absolute, in users or requests/s, e.g. ``4``; or a ratio of the bracket's lower end, e.g.
``"25%"``). A probe whose interval straddles the budget is re-run once ``extend_factor`` times as long; still
unresolved, it counts as not meeting. See :mod:`harness.decision.capacity` and docs/load.md.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from harness.config.base import StrictModel
from harness.config.rules import LatencyMetric
from harness.core.limits import MAX_RATE_RPS, MAX_STEP_REQUESTS, MAX_STEP_S, MAX_THINK_S

SearchKind = Literal["concurrency", "rate"]
_RATIO = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


class SearchSpec(StrictModel):
    """Capacity at SLO: find the highest load (``kind``) whose ``metric`` ``percentile`` meets ``budget_ms``."""

    metric: LatencyMetric = "ttft"
    percentile: Literal[50, 95, 99] = 99
    budget_ms: float = Field(gt=0, le=3_600_000, description="the SLO the percentile must meet")
    kind: SearchKind | None = Field(default=None, description="concurrency (users) or rate (requests/s); default: "
                                    "the kind of steps.levels")
    low: float = Field(gt=0, le=MAX_RATE_RPS, description="the first probe's load")
    high: float = Field(gt=0, le=MAX_RATE_RPS, description="the highest load probed (a concurrency search: "
                        "100,000 users at most, as steps.levels)")
    resolution: float | str = Field(default="25%", description="stop bisecting when the bracket is this narrow: "
                                    "an absolute load (4) or a ratio of its lower end ('25%')")
    growth: float = Field(default=2.0, ge=1.1, le=16, description="the rising probes' load factor")
    probe_duration_s: float = Field(default=30.0, gt=0, le=MAX_STEP_S)
    probe_requests: int | None = Field(default=None, ge=1, le=MAX_STEP_REQUESTS, description="a probe also ends after "
                                       "this many requests")
    extend_factor: float = Field(default=2.0, ge=1.0, le=10, description="an unresolved probe is re-run once this "
                                 "many times as long (1: no re-run)")
    max_probes: int = Field(default=12, ge=1, le=60, description="probes per arm, re-runs included")
    max_search_s: float | None = Field(default=None, gt=0, le=7 * 86_400, description="no probe starts after this "
                                       "many seconds of the arm's search")
    max_error_rate: float = Field(default=0.01, ge=0, le=1, description="a probe with a larger share of failed "
                                  "requests does not meet, whatever its latency")
    think_time_s: float = Field(default=0.0, ge=0, le=MAX_THINK_S, description="a closed-loop search only: each user's "
                                "pause after its previous request ended")

    @field_validator("resolution")
    @classmethod
    def _resolution(cls, value: float | str) -> float | str:
        if isinstance(value, str):
            match = _RATIO.match(value)
            if match is None:
                raise ValueError(f"{value!r}: give an absolute load (4) or a percentage ('25%')")
            if not 0 < float(match.group(1)) <= 1000:
                raise ValueError(f"{value!r}: the percentage must be above 0 and at most 1000")
            return f"{float(match.group(1)):g}%"
        if value <= 0:
            raise ValueError("must be positive")
        return value

    @model_validator(mode="after")
    def _range(self) -> SearchSpec:
        if self.high < self.low:
            raise ValueError(f"high ({self.high:g}) is below low ({self.low:g})")
        longest = self.probe_duration_s * self.extend_factor  # a re-run probe is a step of this length
        if longest > MAX_STEP_S:
            raise ValueError(f"probe_duration_s x extend_factor ({longest:g} s, an unresolved probe's re-run) is "
                             f"above {MAX_STEP_S:g} s, the longest step: lower one of them")
        if self.probe_requests is not None and int(self.probe_requests * self.extend_factor) > MAX_STEP_REQUESTS:
            raise ValueError(f"probe_requests x extend_factor ({int(self.probe_requests * self.extend_factor):,}, "
                             f"an unresolved probe's re-run) is above {MAX_STEP_REQUESTS:,}, the most one step "
                             "sends: lower one of them")
        return self

    @property
    def resolution_ratio(self) -> float | None:
        """The resolution as a ratio of the bracket's lower end (0.25 for '25%'), or None when absolute."""
        return float(self.resolution[:-1]) / 100.0 if isinstance(self.resolution, str) else None

    @property
    def resolution_abs(self) -> float | None:
        """The resolution as an absolute load, or None when a ratio."""
        return None if isinstance(self.resolution, str) else float(self.resolution)

    def worst_case_s(self) -> float:
        """Seconds of load the search may take per arm at most: every other probe a re-run (the longest sequence
        ``max_probes`` allows), capped by ``max_search_s`` plus the longest probe."""
        d, f, m = self.probe_duration_s, self.extend_factor, self.max_probes
        total = (m + 1) // 2 * d + m // 2 * d * f if f > 1.0 else m * d
        return total if self.max_search_s is None else min(total, self.max_search_s + d * f)


def fmt_ms(ms: float | None) -> str:
    """``850 ms`` / ``1.62 s``; ``?`` when unknown."""
    if ms is None:
        return "?"
    return f"{ms / 1000:.3g} s" if ms >= 1000 else (f"{ms:.0f} ms" if ms >= 10 else f"{ms:.3g} ms")


def fmt_load(kind: str, load: float | None) -> str:
    """``48 users`` / ``12.5 req/s``."""
    if load is None:
        return "?"
    return f"{int(load)} users" if kind == "concurrency" else f"{load:g} req/s"


def slo_text(spec: SearchSpec) -> str:
    """``p99 TTFT ≤ 2 s``."""
    return f"p{spec.percentile} {spec.metric.upper()} ≤ {fmt_ms(spec.budget_ms)}"
