"""Per-step evidence for the comparison rules: an arm against the baseline (regression) or the arm without its
newest tier (earns its keep), at the rules' percentiles, with intervals (:mod:`harness.stats.intervals`).

Error rates are fixed in advance. Each comparison is a one-sided test at ``alpha_each`` read off a two-sided
``1 - 2 alpha_each`` interval; ``alpha_each`` divides the rule's ``alpha`` by the size of its family (steps for a
regression rule, steps x measures for earns-its-keep: Holm's procedure, whose first step — Bonferroni — decides
"at least one") and by the number of sequential looks, when steps may end early (a Bonferroni group-sequential
design: valid whatever look ends the step). An effect inside the noise floor (the A/A drift factor) never decides.

**What is compared**: each arm's steady-state sample of the step (:func:`step_sample`; the transient after the load
changed is cut by MSER-5, :mod:`harness.analysis.steady`), in send order. Closed-loop steps are compared unpaired;
two arms are paired by plan key only where the step ran on a planned schedule and both served exactly the same
requests (:func:`paired_values`). Every interval carries the n it compared, and every message prints that n.
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
from harness.decision.bounds import FLOOR_ABOVE_TOLERANCE, RegressionBounds
from harness.schema.findings import ReasonCode
from harness.schema.intervals import RatioCI
from harness.schema.steady import SteadyState
from harness.schema.summary import RuleResult
from harness.stats.intervals import invert, min_samples_to_resolve, quantile_ratio, sum_ratio

F64 = npt.NDArray[np.float64]
LOWER_IS_BETTER = {"ttft_p50", "ttft_p95", "ttft_p99", "itl_p95", "itl_p99", "e2e_p95", "e2e_p99"}
_COLUMNS = {"ttft": "ttft_ms", "e2e": "e2e_ms", "itl": "itl_ms_mean"}


@dataclass(frozen=True)
class StepSample:
    """One arm's steady-state sample at one step (:mod:`harness.analysis.steady`), what every comparison uses.

    ``ttft`` / ``e2e`` / ``itl``: per-request latencies (ms) of the successful requests sent in the steady-state
    window, in send order (the block bootstrap resamples runs of neighbours), with their plan ``keys``;
    ``tokens``: output tokens per time bin of the window (successful requests that completed inside it, whenever
    sent; ``completed`` of them) and ``duration_s`` the window's length: throughput is ``sum(tokens) / duration_s``;
    ``good``: within-SLO flags of every request sent in the window (errors too), for goodput's share.
    ``planned``: the step ran on a planned schedule (rate steps, timestamp replay, fixed-count steps), so two arms
    may be paired by plan key when ``all_keys`` (every request of the step, transient and errors too) are the same
    requests. ``whole`` holds the whole step's latencies and ``gaps`` its inter-token gaps: budgets judge every
    request a user saw, transient included. ``cut``: how the transient was cut (None: not cut, e.g. a test)."""

    ttft: F64
    e2e: F64
    itl: F64
    keys: npt.NDArray[np.str_]
    tokens: F64
    good: F64
    duration_s: float
    gaps: F64 | None = None  # every inter-token gap (ms) of the step's successful requests, for step-level budgets
    completed: int | None = None  # requests behind ``tokens`` (None: one per entry, as a per-request series)
    planned: bool = False
    all_keys: npt.NDArray[np.str_] | None = None
    whole: dict[str, F64] | None = None
    cut: SteadyState | None = None

    def metric(self, name: LatencyMetric) -> F64:
        """The steady-state latencies of ``name`` (what comparisons use)."""
        return {"ttft": self.ttft, "e2e": self.e2e, "itl": self.itl}[name]

    def budget_metric(self, name: LatencyMetric) -> F64:
        """The whole step's latencies of ``name`` (what budgets judge), else the steady state's."""
        return self.whole[name] if self.whole is not None and name in self.whole else self.metric(name)

    @property
    def n(self) -> int:
        return len(self.ttft)

    @property
    def completions(self) -> int:
        return len(self.tokens) if self.completed is None else self.completed


def plan_keys(request_ids: pd.Series) -> npt.NDArray[np.str_]:
    """The plan key of each request id (``arm/step-tag/key``): identical across arms for the same planned request.

    What ``request_ids.astype(str).str.split("/", n=2).str[-1]`` gives (a missing id reads ``nan``), by a list
    comprehension: pandas' string methods cost ~50x more, and every sequential look takes the keys of its step."""
    texts = request_ids.astype(str).to_numpy(dtype=object)
    return np.asarray([t.split("/", 2)[-1] if isinstance(t, str) else "nan" for t in texts], dtype=str)


def step_sample(df: pd.DataFrame, duration_s: float, slo: SloSpec, *, start_ns: int | None = None,
                end_ns: int | None = None, planned: bool = False) -> StepSample:
    """The steady-state sample of one arm's step from derived request records
    (:func:`harness.analysis.derive_latencies`): the transient cut by :func:`harness.analysis.steady.steady_cut`
    over the step's span (``start_ns``/``end_ns``, the journaled span; without them the step starts at its first
    send and lasts ``duration_s``). ``planned``: the step's schedule was planned (see :class:`StepSample`)."""
    from harness.analysis.steady import describe as describe_cut
    from harness.analysis.steady import steady_cut, tokens_series
    from harness.analysis.steptable import within_slo

    if df.empty:
        empty = np.zeros(0)
        return StepSample(empty, empty, empty, np.zeros(0, dtype=str), empty, empty, duration_s, planned=planned,
                          all_keys=np.zeros(0, dtype=str))
    cut = steady_cut(df, start_ns, end_ns, duration_s)
    ordered = df.iloc[cut.order].reset_index(drop=True)
    kept = cut.kept[cut.order]
    ok = ordered["ok"].to_numpy(dtype=bool)
    good_all = within_slo(ordered, slo)
    steady = ordered[kept & ok]
    has_ids = "request_id" in ordered
    keys = plan_keys(steady["request_id"]) if has_ids else np.zeros(0, dtype=str)
    succeeded = ordered[ok].reset_index(drop=True)
    gaps = chunk_gaps(succeeded).ms if "chunk_ns" in succeeded and len(succeeded) else np.zeros(0)
    whole = {"ttft": float_column(succeeded, "ttft_ms"), "e2e": float_column(succeeded, "e2e_ms"),
             "itl": float_column(succeeded, "itl_ms_mean")}
    return StepSample(ttft=float_column(steady, "ttft_ms"), e2e=float_column(steady, "e2e_ms"),
                      itl=float_column(steady, "itl_ms_mean"), keys=keys, tokens=tokens_series(df, cut),
                      good=good_all[kept].astype(np.float64), duration_s=cut.seconds, gaps=gaps,
                      completed=int(cut.completed.sum()), planned=planned,
                      all_keys=plan_keys(ordered["request_id"]) if has_ids else None, whole=whole,
                      cut=describe_cut(df, cut, within_slo(df, slo)))


def paired_values(mine: StepSample, theirs: StepSample, name: LatencyMetric) -> tuple[F64, F64] | None:
    """The two arms' ``name`` for the same planned requests (in ``mine``'s send order), when both steps ran on a
    planned schedule and served exactly the same requests; None otherwise (closed-loop steps are compared
    unpaired: the faster arm gets further down the plan, so "the requests both served" would be its first)."""
    from harness.analysis.steady import pair_positions

    if not (mine.planned and theirs.planned) or mine.all_keys is None or theirs.all_keys is None:
        return None
    found = pair_positions(mine.all_keys, mine.keys, theirs.all_keys, theirs.keys)
    if found is None:
        return None
    ia, ib = found
    return mine.metric(name)[ia], theirs.metric(name)[ib]


def latency_ratio(mine: StepSample, theirs: StepSample, name: LatencyMetric, q: float, confidence: float) -> RatioCI:
    """``quantile_q(mine) / quantile_q(theirs)`` of ``name`` on the steady-state samples, paired by plan key only
    where :func:`paired_values` allows."""
    pairs = paired_values(mine, theirs, name)
    if pairs is not None:
        return quantile_ratio(pairs[0], pairs[1], q, confidence, paired=True)
    return quantile_ratio(mine.metric(name), theirs.metric(name), q, confidence)


def compared_n(ci: RatioCI) -> str:
    """The samples a ratio compared, as messages print them."""
    if ci.n is None or ci.n_versus is None:
        return "n=?"
    return f"n={ci.n} pairs" if ci.paired else f"n={ci.n}/{ci.n_versus}"


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


def _result(rule: RegressionRule, step: int, status: Status, message: str, bounds: RegressionBounds,
            ci: RatioCI | None = None, reason: ReasonCode | None = None) -> RuleResult:
    return RuleResult(rule=rule.label, kind="regression", status=status, critical=rule.critical,
                      dry_run=rule.dry_run, step=step, message=message, interval=ci,
                      threshold=rule.max_ratio if ci is not None else None, pass_bound=round(bounds.pass_bound, 4),
                      breach_bound=round(bounds.breach_bound, 4), floor=bounds.floor, reason_code=reason)


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
    bounds = RegressionBounds(rule.max_ratio, floor)
    if len(a) < need or len(b) < need:
        return StepVerdict(_result(rule, step, "unresolved", f"{head}: {len(a)} arm and {len(b)} baseline "
                                   "steady-state samples; "
                                   f"{need} on each side are needed to resolve it at {confidence:.1%}", bounds),
                           judged=False)
    ci = latency_ratio(arm, base, rule.metric, q, confidence)
    p_mw = float(mannwhitneyu(a, b, alternative="greater").pvalue)
    detail = (f"{head} {_fmt(float(np.quantile(a, q)))} vs baseline {_fmt(float(np.quantile(b, q)))}: ratio "
              f"{_ci_text(ci)}, limit {rule.max_ratio:.2f}: {bounds.text()}; Mann-Whitney U one-sided "
              f"p={p_mw:.3g} (second view, not deciding), {compared_n(ci)} (steady state)")
    if not ci.resolved or ci.lo is None or ci.hi is None:
        return StepVerdict(_result(rule, step, "unresolved", f"unresolved: {detail}", bounds, ci), judged=True)
    if ci.lo > bounds.breach_bound:
        return StepVerdict(_result(rule, step, "breach", f"regressed: {detail}", bounds, ci), judged=True)
    if ci.hi <= bounds.pass_bound:
        within = ("within limit even at this noise floor (an improvement beyond the drift)"
                  if bounds.floor_above_tolerance else "within limit")
        return StepVerdict(_result(rule, step, "pass", f"{within}: {detail}", bounds, ci), judged=True)
    if bounds.floor_above_tolerance:
        return StepVerdict(_result(rule, step, "unresolved", f"cannot rule out a regression at this noise floor "
                                   f"({bounds.cannot_rule_out()}): {detail}", bounds, ci, FLOOR_ABOVE_TOLERANCE),
                           judged=True)
    return StepVerdict(_result(rule, step, "unresolved", f"cannot tell (the interval straddles the limit): {detail}",
                               bounds, ci), judged=True)


def improvement(measure: KeepMeasure, mine: StepSample, theirs: StepSample, confidence: float) -> RatioCI:
    """How much better ``mine`` is than ``theirs`` on one measure (> 1 = better), with its interval."""
    metric, _, pct = measure.partition("_p")
    if metric in _COLUMNS and pct:
        name: LatencyMetric = "ttft" if metric == "ttft" else ("e2e" if metric == "e2e" else "itl")
        return invert(latency_ratio(mine, theirs, name, float(pct) / 100.0, confidence))
    if measure == "output_tokens_per_s":
        return sum_ratio(mine.tokens, theirs.tokens, mine.duration_s, theirs.duration_s, confidence,
                         n=mine.completions, n_versus=theirs.completions, unit="completed requests")
    if measure == "goodput":
        return sum_ratio(mine.good, theirs.good, float(len(mine.good)), float(len(theirs.good)), confidence)
    return RatioCI(note=f"{measure}: no per-request sample to put an interval on (server counters)",
                   confidence=confidence)


def describe(measure: str, step: int, label: str, other: str, ci: RatioCI) -> str:
    """A sentence for one earns-its-keep comparison."""
    return f"{measure} at step {step} ({label}) vs {other}: {_ci_text(ci)}, {compared_n(ci)} (steady state)"


def finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
