"""The figures a results history compares, refused when they cannot be measurements.

The index reads, per arm and step, p99 TTFT, p99 ITL and output tokens/s (and the top step's p99 TTFT interval for
the trend). A figure that is not finite, or beyond what any run can measure, is dropped from the trend and from the
drift test and listed with the entry as :class:`InvalidFigure` (the index shows it as invalid, never as a number):

* a latency above :data:`MAX_LATENCY_MS`, the longest request timeout a scenario accepts (``steps.request_timeout_s``
  at most 7,200 s): no request the harness timed can have taken longer;
* output tokens/s above :data:`MAX_TOKENS_PER_S`, a billion a second, orders of magnitude beyond any deployment
  one run drives.

A value of 0 or below is no figure to compare on a ratio scale either (a step that completed nothing), but it is
what was measured, so it is a gap, not invalid. summary.json files holding NaN or Infinity are refused when read
(:func:`harness.report.load.load_summary_file`); the check here also covers summaries built in memory.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict

from harness.schema.intervals import QuantileCI
from harness.schema.summary import StepSummary

MAX_LATENCY_MS = 7200.0 * 1000.0
MAX_TOKENS_PER_S = 1e9
LIMITS = {"ttft_p99_ms": MAX_LATENCY_MS, "itl_p99_ms": MAX_LATENCY_MS, "output_tokens_per_s": MAX_TOKENS_PER_S,
          "ttft_p99_ci": MAX_LATENCY_MS}
Reason = Literal["not-finite", "implausible"]


class InvalidFigure(BaseModel):
    """A figure the index refused: where it was, what it read (as text: NaN is no JSON number), and why."""

    model_config = ConfigDict(extra="forbid")
    arm: str
    step: str
    measure: str  # a key of LIMITS
    value: str  # e.g. "NaN", "Infinity", "1e+308"
    reason: Reason
    limit: float


def shown(value: float) -> str:
    """A number as text with a bounded number of digits (``NaN``, ``Infinity``, ``1e+308``, ``2650``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return f"{value:.6g}"


def problem(value: float, limit: float) -> Reason | None:
    """Why ``value`` is no measurement (None: it may be one)."""
    if not math.isfinite(value):
        return "not-finite"
    return "implausible" if abs(value) > limit else None


def step_figures(step: StepSummary) -> dict[str, float | None]:
    """The step's raw figures, per measure key (a p99 the step could not resolve, "at least", is None)."""
    def p99(ttft: bool) -> float | None:
        pct = step.ttft_ms if ttft else step.itl_ms
        return None if pct.p99_ci is not None and not pct.p99_ci.resolved else pct.p99

    return {"ttft_p99_ms": p99(True), "itl_p99_ms": p99(False), "output_tokens_per_s": step.output_tokens_per_s}


def checked(arm: str, step: str, measure: str, value: float | None,
            invalid: list[InvalidFigure]) -> float | None:
    """``value`` if it may be a measurement; else None, with the refusal appended to ``invalid``."""
    if value is None or isinstance(value, bool):
        return None
    value = float(value)
    limit = LIMITS[measure]
    reason = problem(value, limit)
    if reason is None:
        return value
    invalid.append(InvalidFigure(arm=arm, step=step, measure=measure, value=shown(value), reason=reason,
                                 limit=limit))
    return None


def checked_ci(arm: str, step: str, ci: QuantileCI | None, invalid: list[InvalidFigure]) -> QuantileCI | None:
    """The interval if both its ends may be measurements; else None, with the refusal recorded."""
    if ci is None:
        return None
    for end in (ci.lo, ci.hi):
        if end is not None and checked(arm, step, "ttft_p99_ci", end, invalid) is None:
            return None
    return ci


def invalid_text(figure: InvalidFigure) -> str:
    """``p99 TTFT at c32: 1e+308 ms, beyond any request timeout (7,200,000 ms)``."""
    what = {"ttft_p99_ms": ("p99 TTFT", "ms"), "itl_p99_ms": ("p99 ITL", "ms"),
            "output_tokens_per_s": ("output tokens/s", "tok/s"), "ttft_p99_ci": ("p99 TTFT interval", "ms")}
    label, unit = what.get(figure.measure, (figure.measure, ""))
    if figure.reason == "not-finite":
        return f"{label} at {figure.step}: {figure.value}, not a finite number"
    bound = "any request timeout" if unit == "ms" else "any plausible rate"
    return f"{label} at {figure.step}: {figure.value} {unit}, beyond {bound} ({figure.limit:,.0f} {unit})"
