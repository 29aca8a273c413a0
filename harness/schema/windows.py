"""Windowed percentiles inside an arm's steps (``summary.json``: ``arms[].windows``), for the budget rules and the
timeline chart: p99 always, other percentiles where a budget rule is judged at them."""

from __future__ import annotations

from typing import Any

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from harness.schema.base import SchemaModel as _Model
from harness.schema.intervals import QuantileCI


class WindowQuantile(_Model):
    """One window's percentile of one metric, with its interval (None: no samples in the window)."""

    value_ms: float | None = None
    ci: QuantileCI | None = None


class WindowPoint(_Model):
    """Windowed percentiles over time inside an arm (for rollback rules and the timeline chart): p99 always, and in
    ``percentiles`` others keyed ``ttft_p95``, ``itl_p50``, ... (the summary keeps those a budget rule of the arm
    was judged at)."""

    step: int
    start_s: float  # seconds since the arm's first step started
    end_s: float
    requests: int
    ttft_p99_ms: float | None = None
    itl_p99_ms: float | None = None
    e2e_p99_ms: float | None = None
    ttft_p99_ci: QuantileCI | None = None
    itl_p99_ci: QuantileCI | None = None
    e2e_p99_ci: QuantileCI | None = None
    breached: list[str] = Field(default_factory=list)  # rule labels with a resolved breach in this window
    unresolved: list[str] = Field(default_factory=list)  # rule labels this window could not judge
    percentiles: dict[str, WindowQuantile] = Field(default_factory=dict)  # besides p99: "ttft_p95" -> value, ci

    @model_serializer(mode="wrap")
    def _without_empty_percentiles(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Leave ``percentiles`` out when no budget rule used one (a p99-only run's summary reads as before)."""
        data: dict[str, Any] = handler(self)
        if not self.percentiles:
            data.pop("percentiles", None)
        return data

    def quantile(self, metric: str, percentile: float) -> WindowQuantile | None:
        """The window's ``metric`` (ttft / itl / e2e) at ``percentile``; None when it was not computed."""
        if percentile == 99.0:
            return WindowQuantile(value_ms=getattr(self, f"{metric}_p99_ms"), ci=getattr(self, f"{metric}_p99_ci"))
        return self.percentiles.get(window_key(metric, percentile))


def window_key(metric: str, percentile: float) -> str:
    """The key of a window percentile other than p99 in :attr:`WindowPoint.percentiles` (``ttft_p95``)."""
    return f"{metric}_p{percentile:g}"
