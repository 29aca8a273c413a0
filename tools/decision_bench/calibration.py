"""The calibration figures: interval coverage of the truth, the ratio estimate's bias, and error rates with exact
binomial intervals.

* **coverage**: the share of rollouts whose nominal 95% two-sided interval (computed with the decision's own
  :func:`harness.decision.evidence.improvement` at confidence 0.95) holds the truth; unresolved intervals are
  counted apart (neither covering nor missing). Its interval is the exact Clopper-Pearson one
  (``scipy.stats.binomtest``).
* **bias**: mean estimate / truth - 1, with a 95% Student-t interval of the mean (``scipy.stats.t``).
* **rates** (false go, false no-go, power): k of n with the exact Clopper-Pearson 95% interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.decision.evidence import StepSample, improvement
from tools.decision_bench.truth import MEASURES

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Rate:
    """k of n with its exact (Clopper-Pearson) interval."""

    k: int
    n: int
    lo: float
    hi: float

    @property
    def rate(self) -> float:
        return self.k / self.n if self.n else math.nan

    def text(self, digits: int = 1) -> str:
        if not self.n:
            return "n/a"
        return (f"{self.k}/{self.n} = {self.rate:.{digits}%} [{self.lo:.{digits}%}, {self.hi:.{digits}%}]")

    def as_dict(self) -> dict[str, Any]:
        return {"k": self.k, "n": self.n, "rate": None if not self.n else self.rate, "lo": self.lo, "hi": self.hi}


def binomial(k: int, n: int, confidence: float = CONFIDENCE) -> Rate:
    """``k`` of ``n`` with the exact Clopper-Pearson interval (``scipy.stats.binomtest``); n = 0: no interval."""
    if n < 0 or not 0 <= k <= max(n, 0):
        raise ValueError(f"need 0 <= k <= n (k={k}, n={n})")
    if n == 0:
        return Rate(0, 0, math.nan, math.nan)
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return Rate(k, n, float(ci.low), float(ci.high))


Interval = Mapping[str, Any]  # {"ratio", "lo", "hi", "resolved"} as :func:`estimates` writes them


def estimates(arm: Mapping[int, StepSample], base: Mapping[int, StepSample],
              confidence: float = CONFIDENCE) -> dict[int, dict[str, dict[str, Any]]]:
    """Step -> measure -> the decision's improvement interval of the arm over the baseline at ``confidence``."""
    out: dict[int, dict[str, dict[str, Any]]] = {}
    for step in sorted(set(arm) & set(base)):
        row: dict[str, dict[str, Any]] = {}
        for measure in MEASURES:
            ci = improvement(measure, arm[step], base[step], confidence)  # type: ignore[arg-type]
            row[measure] = {"ratio": ci.ratio, "lo": ci.lo, "hi": ci.hi, "resolved": bool(ci.resolved),
                            "n": ci.n, "n_versus": ci.n_versus}
        out[step] = row
    return out


@dataclass(frozen=True)
class Coverage:
    """How many resolved intervals held the truth, and how many were unresolved."""

    rate: Rate
    unresolved: int


def coverage(intervals: Iterable[Interval], truth: float) -> Coverage:
    """The intervals that hold ``truth`` (``lo <= truth <= hi``) among the resolved ones."""
    hits = n = unresolved = 0
    for ci in intervals:
        lo, hi = ci.get("lo"), ci.get("hi")
        if not ci.get("resolved") or lo is None or hi is None:
            unresolved += 1
            continue
        n += 1
        hits += int(lo <= truth <= hi)
    return Coverage(binomial(hits, n), unresolved)


@dataclass(frozen=True)
class Bias:
    """Mean estimate / truth - 1 with its 95% interval over n rollouts."""

    bias: float
    lo: float
    hi: float
    n: int

    def text(self) -> str:
        if not self.n:
            return "n/a"
        if not math.isfinite(self.lo):
            return f"{self.bias:+.2%} (n={self.n})"
        return f"{self.bias:+.2%} [{self.lo:+.2%}, {self.hi:+.2%}] (n={self.n})"


def bias(values: Sequence[float | None], truth: float, confidence: float = CONFIDENCE) -> Bias:
    """``mean(values) / truth - 1`` with a Student-t interval of the mean (``scipy.stats.t``); None values skipped."""
    x = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    if truth <= 0 or not math.isfinite(truth):
        raise ValueError(f"the truth must be a positive number (got {truth})")
    if len(x) == 0:
        return Bias(math.nan, math.nan, math.nan, 0)
    mean = float(x.mean())
    if len(x) < 2:
        return Bias(mean / truth - 1.0, math.nan, math.nan, 1)
    from scipy.stats import t

    half = float(t.ppf(0.5 + confidence / 2.0, len(x) - 1)) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return Bias(mean / truth - 1.0, (mean - half) / truth - 1.0, (mean + half) / truth - 1.0, len(x))
