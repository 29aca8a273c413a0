"""Per-step evidence for the comparison rules: an arm against the baseline (regression) or the arm without its
newest tier (earns its keep), at the rules' percentiles, with intervals (:mod:`harness.stats.intervals`).

Error rates are fixed in advance. Each comparison is a one-sided test at ``alpha_each`` read off a two-sided
``1 - 2 alpha_each`` interval; ``alpha_each`` divides the rule's ``alpha`` by the size of its family (steps for a
regression rule, steps x measures for earns-its-keep: Holm's procedure, whose first step — Bonferroni — decides
"at least one") and by the number of sequential looks, when steps may end early (a Bonferroni group-sequential
design: valid whatever look ends the step). An effect inside the noise floor (the A/A drift factor) never decides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.stats import mannwhitneyu

from harness.analysis.latency import chunk_gaps, float_column
from harness.config.rules import KeepMeasure, LatencyMetric, RegressionRule, SloSpec
from harness.schema.intervals import RatioCI
from harness.schema.summary import RuleResult
from harness.stats.intervals import invert, min_samples_to_resolve, quantile_ratio, sum_ratio

F64 = npt.NDArray[np.float64]
LOWER_IS_BETTER = {"ttft_p50", "ttft_p95", "ttft_p99", "itl_p95", "itl_p99", "e2e_p95", "e2e_p99"}
_COLUMNS = {"ttft": "ttft_ms", "e2e": "e2e_ms", "itl": "itl_ms_mean"}


@dataclass(frozen=True)
class StepSample:
    """One arm's requests at one step: per-request latencies (ms, successful requests), plan keys, output tokens,
    within-SLO flags (all requests) and the step's duration."""

    ttft: F64
    e2e: F64
    itl: F64
    keys: npt.NDArray[np.str_]
    tokens: F64
    good: F64
    duration_s: float
    gaps: F64 | None = None  # every inter-token gap (ms) of the successful requests, for step-level ITL budgets

    def metric(self, name: LatencyMetric) -> F64:
        return {"ttft": self.ttft, "e2e": self.e2e, "itl": self.itl}[name]

    def keys_for(self, values: F64) -> npt.NDArray[np.str_] | None:
        """The plan keys, when they line up with ``values`` (one per successful request), for pairing."""
        return self.keys if len(self.keys) == len(values) else None

    @property
    def n(self) -> int:
        return len(self.ttft)


def plan_keys(request_ids: pd.Series) -> npt.NDArray[np.str_]:
    """The plan key of each request id (``arm/step-tag/key``): identical across arms for the same planned request."""
    return np.asarray(request_ids.astype(str).str.split("/", n=2).str[-1].to_numpy(), dtype=str)


def step_sample(df: pd.DataFrame, duration_s: float, slo: SloSpec) -> StepSample:
    """The sample of one arm's step from derived request records (:func:`harness.analysis.derive_latencies`)."""
    from harness.analysis.steptable import within_slo

    if df.empty:
        empty = np.zeros(0)
        return StepSample(empty, empty, empty, np.zeros(0, dtype=str), empty, empty, duration_s)
    ok = df["ok"].to_numpy(dtype=bool)
    good_df = df[ok]
    keys = plan_keys(good_df["request_id"]) if "request_id" in good_df else np.zeros(0, dtype=str)
    gaps = chunk_gaps(good_df.reset_index(drop=True)).ms if "chunk_ns" in good_df and len(good_df) else np.zeros(0)
    return StepSample(ttft=float_column(good_df, "ttft_ms"), e2e=float_column(good_df, "e2e_ms"),
                      itl=float_column(good_df, "itl_ms_mean"), keys=keys,
                      tokens=np.nan_to_num(float_column(good_df, "output_tokens_eff")),
                      good=within_slo(df, slo).astype(np.float64), duration_s=duration_s, gaps=gaps)


def _fmt(ms: float | None) -> str:
    return "n/a" if ms is None else (f"{ms:.0f} ms" if ms >= 100 else f"{ms:.1f} ms")


def _ci_text(ci: RatioCI) -> str:
    if not ci.resolved or ci.lo is None or ci.hi is None:
        return f"{ci.ratio:.2f}x, interval unresolved" if ci.ratio is not None else "unresolved"
    return f"{ci.ratio:.2f}x [{ci.lo:.2f}, {ci.hi:.2f}] ({ci.confidence:.1%} interval, {ci.method})"


@dataclass(frozen=True)
class StepVerdict:
    """One step's comparison: the result and whether the step could judge it at all (enough samples to resolve the
    percentile on both sides)."""

    result: RuleResult
    judged: bool


Status = Literal["pass", "breach", "unresolved", "not-applicable"]


def _result(rule: RegressionRule, step: int, status: Status, message: str, ci: RatioCI | None = None) -> RuleResult:
    return RuleResult(rule=rule.label, kind="regression", status=status, critical=rule.critical,
                      dry_run=rule.dry_run, step=step, message=message, interval=ci,
                      threshold=rule.max_ratio if ci is not None else None)


def regression_step(rule: RegressionRule, step: int, label: str, arm: StepSample, base: StepSample,
                    alpha_each: float, floor: float = 1.0) -> StepVerdict:
    """Is the arm's percentile more than ``max_ratio`` times the baseline's at this step?"""
    q = rule.percentile / 100.0
    name = f"p{rule.percentile:g} {rule.metric.upper()}"
    raw_a, raw_b = arm.metric(rule.metric), base.metric(rule.metric)
    a, b = raw_a[~np.isnan(raw_a)], raw_b[~np.isnan(raw_b)]
    confidence = 1.0 - 2.0 * alpha_each
    need = max(rule.min_samples, min_samples_to_resolve(q, confidence))
    head = f"step {step} ({label}): {name}"
    if len(a) < need or len(b) < need:
        return StepVerdict(_result(rule, step, "unresolved", f"{head}: {len(a)} arm and {len(b)} baseline samples; "
                                   f"{need} on each side are needed to resolve it at {confidence:.1%}"), judged=False)
    ci = quantile_ratio(raw_a, raw_b, q, confidence, keys_a=arm.keys_for(raw_a), keys_b=base.keys_for(raw_b))
    p_mw = float(mannwhitneyu(a, b, alternative="greater").pvalue)
    limit = rule.max_ratio
    floor_text = f" x noise floor {floor:.3f}" if floor > 1.0 else ""
    detail = (f"{head} {_fmt(float(np.quantile(a, q)))} vs baseline {_fmt(float(np.quantile(b, q)))}: ratio "
              f"{_ci_text(ci)}, limit {limit:.2f}{floor_text}; Mann-Whitney U one-sided p={p_mw:.3g} (second view, "
              f"not deciding), n={len(a)}/{len(b)}")
    if not ci.resolved or ci.lo is None or ci.hi is None:
        return StepVerdict(_result(rule, step, "unresolved", f"unresolved: {detail}", ci), judged=True)
    if ci.lo > limit * floor:
        return StepVerdict(_result(rule, step, "breach", f"regressed: {detail}", ci), judged=True)
    if ci.hi * floor <= limit:
        return StepVerdict(_result(rule, step, "pass", f"within limit: {detail}", ci), judged=True)
    return StepVerdict(_result(rule, step, "unresolved", f"cannot tell (the interval straddles the limit): {detail}",
                               ci), judged=True)


def improvement(measure: KeepMeasure, mine: StepSample, theirs: StepSample, confidence: float) -> RatioCI:
    """How much better ``mine`` is than ``theirs`` on one measure (> 1 = better), with its interval."""
    metric, _, pct = measure.partition("_p")
    if metric in _COLUMNS and pct:
        name: LatencyMetric = "ttft" if metric == "ttft" else ("e2e" if metric == "e2e" else "itl")
        m, t = mine.metric(name), theirs.metric(name)
        return invert(quantile_ratio(m, t, float(pct) / 100.0, confidence, keys_a=mine.keys_for(m),
                                     keys_b=theirs.keys_for(t)))
    if measure == "output_tokens_per_s":
        return sum_ratio(mine.tokens, theirs.tokens, mine.duration_s, theirs.duration_s, confidence)
    if measure == "goodput":
        return sum_ratio(mine.good, theirs.good, float(len(mine.good)), float(len(theirs.good)), confidence)
    return RatioCI(note=f"{measure}: no per-request sample to put an interval on (server counters)",
                   confidence=confidence)


def describe(measure: str, step: int, label: str, other: str, ci: RatioCI) -> str:
    """A sentence for one earns-its-keep comparison."""
    return f"{measure} at step {step} ({label}) vs {other}: {_ci_text(ci)}"


def finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
