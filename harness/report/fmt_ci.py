"""Percentiles and ratios with their uncertainty, as every report shows them.

A percentile is a measurement with a sample size and an interval: ``2,310 ms [2,105–2,544] n=412``. One the sample
cannot resolve is never printed as if exact: ``≥ 812 ms (n=40, unresolved)`` (the sample bounds it from below
only; the sample percentile itself goes to the tooltip). A percentile recorded without an interval (an older
summary) says so: ``2,310 ms (n=412, no interval)``. Ratios read ``0.65x [0.58–0.73]`` or
``unresolved (point 0.93x)``; a ratio interval unbounded above reads ``[0.80–∞]``. A percentile, interval end or
ratio that is not a finite number otherwise (NaN; an infinite percentile or ratio: never one the harness writes, but
a summary built in memory may carry one) reads ``invalid (not a finite number)``, never ``nan`` or ``inf``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Literal

from harness.report.fmt import INVALID, MISSING, ms, ratio
from harness.schema.intervals import Percentiles, QuantileCI, RatioCI
from harness.schema.summary import RuleResult, Statistics, Summary

Kind = Literal["none", "exact", "point", "at-least", "at-most", "unresolved", "invalid"]
NOT_FINITE = "not a finite number"
_Q = {"p50": 0.5, "p95": 0.95, "p99": 0.99}


@cache
def samples_to_resolve(pct: str, confidence: float = 0.95) -> int:
    """How many samples the percentile's two-sided order-statistic interval needs (e.g. p99: 368 at 95%)."""
    from harness.stats.intervals import min_samples_to_resolve

    return min_samples_to_resolve(_Q.get(pct, 0.99), confidence)


@dataclass(frozen=True)
class PctView:
    """One percentile as text: ``value`` (main figure), ``detail`` (interval and n), ``note`` (tooltip)."""

    kind: Kind
    value: str
    detail: str = ""
    note: str = ""
    n: int | None = None

    @property
    def resolved(self) -> bool:
        return self.kind == "exact"

    @property
    def unresolved(self) -> bool:
        """True when the figure must not be read as exact (bounded on one side only, or not at all)."""
        return self.kind in ("at-least", "at-most", "unresolved", "invalid")

    @property
    def parts(self) -> list[str]:
        """``detail`` in pieces that may wrap between them (``[2,105–2,544]``, ``n=412``)."""
        return self.detail.split(" ") if self.kind == "exact" else [self.detail] if self.detail else []

    @property
    def text(self) -> str:
        """One line: ``2,310 ms [2,105–2,544] n=412`` or ``≥ 812 ms (n=40, unresolved)``."""
        if not self.detail:
            return self.value
        if self.kind == "exact":
            return f"{self.value} {self.detail}"
        return f"{self.value} ({self.detail})"


def _not_finite(*values: float | None) -> bool:
    return any(v is not None and not math.isfinite(v) for v in values)


def _end(value: float) -> str:
    """A ratio interval's end: ``0.73``, or ``∞`` for an end unbounded above (``-∞`` below)."""
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    return f"{value:.2f}"


def _range(lo: float, hi: float, unit: str) -> str:
    if unit == "ms":
        return f"[{ms(lo).removesuffix(' ms')}–{ms(hi).removesuffix(' ms')}]"
    return f"[{lo:.2f}–{hi:.2f}]"


def interval_view(value: float | None, ci: QuantileCI | None, *, count: int = 0, pct: str = "p99") -> PctView:
    """A percentile from its sample value and interval (``count`` is the sample size when there is no interval)."""
    if _not_finite(value, *((ci.lo, ci.hi) if ci is not None else ())):
        n = ci.n if ci is not None else count
        return PctView("invalid", INVALID, NOT_FINITE, f"the {pct} or its interval is not a finite number", n)
    if value is None:
        if count == 0 and (ci is None or ci.n == 0):
            return PctView("none", "no samples", n=0)
        if ci is not None and ci.lo is not None:
            return PctView("at-least", f"≥ {ms(ci.lo)}", f"n={ci.n}, unresolved", ci.note or "", ci.n)
        return PctView("none", MISSING, n=count)
    if ci is None:
        return PctView("point", ms(value), f"n={count:,}, no interval",
                       f"sample {pct} {ms(value)}; no interval was recorded", count)
    sample = f"sample {pct} {ms(value)}"
    note = f"{sample}; {ci.note}" if ci.note else sample
    if ci.resolved and ci.lo is not None and ci.hi is not None:
        return PctView("exact", ms(value), f"{_range(ci.lo, ci.hi, 'ms')} n={ci.n:,}", note, ci.n)
    if ci.lo is not None:
        return PctView("at-least", f"≥ {ms(ci.lo)}", f"n={ci.n:,}, unresolved", note, ci.n)
    if ci.hi is not None:
        return PctView("at-most", f"≤ {ms(ci.hi)}", f"n={ci.n:,}, unresolved", note, ci.n)
    return PctView("unresolved", "unresolved", f"n={ci.n:,}", note, ci.n)


def pct_view(p: Percentiles, pct: str) -> PctView:
    """``p50`` / ``p95`` / ``p99`` of a :class:`Percentiles`."""
    return interval_view(getattr(p, pct), p.ci(pct), count=p.count, pct=pct)


def point_view(value: float | None, n: int, pct: str = "p99", confidence: float = 0.95) -> PctView:
    """A percentile recorded without an interval (drill phases): marked unresolved when ``n`` is too small."""
    if value is None:
        return PctView("none", "no samples" if n <= 0 else MISSING, n=n)
    if _not_finite(value):
        return PctView("invalid", INVALID, NOT_FINITE, f"the {pct} is not a finite number", n)
    need = samples_to_resolve(pct, confidence)
    if n < need:
        return PctView("unresolved", ms(value), f"n={n:,}, unresolved",
                       f"{pct} from {n} samples is near the sample maximum; {need} are needed to bound it", n)
    return PctView("point", ms(value), f"n={n:,}, no interval", f"sample {pct}; no interval was recorded", n)


@dataclass(frozen=True)
class RatioView:
    """A ratio with its interval as text."""

    value: str
    resolved: bool
    note: str = ""

    @property
    def text(self) -> str:
        return self.value


def ratio_view(ci: RatioCI | None, usual_confidence: float = 0.95) -> RatioView:
    """``0.65x [0.58–0.73]``, ``unresolved (point 0.93x)`` or ``n/a``; an interval at another confidence than
    the run's usual one says so (``1.05x [0.87–1.27] at 98.3%``, e.g. a Holm-adjusted comparison)."""
    if ci is None:
        return RatioView("n/a", False)
    note = "; ".join(x for x in (f"{ci.confidence:.1%} {ci.method}" if ci.method else "", ci.note or "") if x)
    if _not_finite(ci.ratio) or any(v is not None and math.isnan(v) for v in (ci.lo, ci.hi)):
        return RatioView(f"{INVALID} ({NOT_FINITE})", False, note)
    if ci.resolved and ci.lo is not None and ci.hi is not None and ci.ratio is not None:
        at = f" at {ci.confidence:.1%}" if abs(ci.confidence - usual_confidence) > 1e-6 else ""
        return RatioView(f"{ratio(ci.ratio)} [{_end(ci.lo)}–{_end(ci.hi)}]{at}", True, note)
    if ci.ratio is None:
        return RatioView("unresolved", False, note)
    return RatioView(f"unresolved (point {ratio(ci.ratio)})", False, note)


def threshold_text(rule: RuleResult) -> str:
    """A rule's threshold: milliseconds for a budget, a ratio (``1.05x``) otherwise; ``""`` when none. A regression
    held against a noise floor names both bounds it needed (``pass ≤ 0.951, breach > 1.273``)."""
    if rule.threshold is None:
        return ""
    if rule.kind == "regression" and rule.pass_bound is not None and rule.breach_bound is not None \
            and abs(rule.pass_bound - rule.breach_bound) > 1e-9:
        return f"pass ≤ {rule.pass_bound:.3f}, breach > {rule.breach_bound:.3f}"
    return ms(rule.threshold) if rule.kind == "budget" else ratio(rule.threshold)


def evidence_text(rule: RuleResult) -> str:
    """A rule's interval against its threshold, e.g. ``0.65x [0.58–0.73] vs 1.05x``; ``""`` when neither."""
    parts = []
    if rule.interval is not None:
        parts.append(ratio_view(rule.interval).text)
    if rule.threshold is not None:
        parts.append(f"vs {threshold_text(rule)}" if parts else f"threshold {threshold_text(rule)}")
    if rule.shared_with_baseline:
        parts.append("(the baseline breaks it too)")
    return " ".join(parts)


def quantile_method(summary: Summary) -> str:
    """How the percentiles' intervals were computed (the summary's statistics, else the figures' own method)."""
    if summary.statistics.quantile_method:
        return summary.statistics.quantile_method
    for arm in summary.arms:
        for step in arm.steps:
            if step.ttft_ms.method:
                return step.ttft_ms.method
    return "method not recorded"


def legend(summary: Summary) -> str:
    """What the figures mean: interval, confidence, method, n, and how an unresolved percentile reads."""
    st: Statistics = summary.statistics
    conf = f"{st.confidence:.0%}"
    text = (f"Percentiles read value [low–high] n=samples: the sample percentile, its {conf} confidence interval "
            f"({quantile_method(summary)}) and the sample size (requests; for ITL, the requests whose gaps were "
            f"pooled). “≥ x (unresolved)”: too few samples to bound the percentile from above (a p99 needs "
            f"{samples_to_resolve('p99', st.confidence)} at {conf}); it is at least x and is never compared as if "
            f"exact.")
    if st.ratio_method:
        text += f" Ratios between arms: {conf} {st.ratio_method}."
    rules = [f"alpha {st.alpha:g}"]
    if st.multiplicity:
        rules.append(f"multiplicity: {st.multiplicity}")
    if st.sequential:
        rules.append(f"sequential: {st.sequential}")
    return text + " Rules: " + "; ".join(rules) + "."


def load_time_text(summary: Summary) -> str:
    """``1,240 s of 1,620 s planned; sequential steps saved 23% of load time (4 of 9 steps ended early)``."""
    lt = summary.load_time
    if lt.planned_s <= 0:
        return ""
    text = f"{lt.used_s:,.0f} s of {lt.planned_s:,.0f} s planned"
    if lt.steps_ended_early:
        text += (f"; sequential steps saved {lt.saved_share:.0%} of load time ({lt.steps_ended_early} of "
                 f"{lt.steps} steps ended early)")
    else:
        text += "; no step ended early"
    return text
