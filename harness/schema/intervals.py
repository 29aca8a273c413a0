"""Figures with their uncertainty, as ``summary.json`` holds them: a percentile's interval, a ratio's interval, and a
step's percentiles each with its interval (computed by :mod:`harness.stats.intervals`)."""

from __future__ import annotations

from harness.schema.base import SchemaModel as _Model


class QuantileCI(_Model):
    """A percentile's confidence interval (see :mod:`harness.stats.intervals`).

    ``lo``/``hi`` None: the sample cannot bound the percentile on that side; ``resolved`` only when both ends
    exist. ``n`` is the sample size the interval was computed for (for inter-token gaps, the requests)."""

    lo: float | None = None
    hi: float | None = None
    resolved: bool = False
    n: int = 0
    note: str | None = None


class RatioCI(_Model):
    """A ratio between two arms (or an A/A pair) with its confidence interval; unresolved when either side's
    percentile is, or the samples are too few.

    ``n`` / ``n_versus``: the samples the ratio compared, the arm's and the reference's (steady-state requests; for
    a throughput ratio, the requests that completed inside each steady-state window); ``paired``: the two were the
    same planned requests (then ``n == n_versus``, the pairs). None: not recorded (summaries before version 6)."""

    ratio: float | None = None
    lo: float | None = None
    hi: float | None = None
    resolved: bool = False
    confidence: float = 0.95
    method: str = ""
    note: str | None = None
    n: int | None = None
    n_versus: int | None = None
    paired: bool | None = None


class Percentiles(_Model):
    """Latency percentiles in milliseconds (None when there were no samples), each with its interval."""

    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    mean: float | None = None
    count: int = 0
    p50_ci: QuantileCI | None = None
    p95_ci: QuantileCI | None = None
    p99_ci: QuantileCI | None = None
    confidence: float | None = None
    method: str | None = None

    def ci(self, pct: str) -> QuantileCI | None:
        """The interval of ``p50`` / ``p95`` / ``p99``."""
        value = getattr(self, f"{pct}_ci", None)
        return value if isinstance(value, QuantileCI) else None

    def resolved(self, pct: str) -> bool:
        """True when the percentile's interval has both ends inside the sample."""
        ci = self.ci(pct)
        return ci is not None and ci.resolved
