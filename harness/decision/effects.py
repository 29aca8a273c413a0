"""Effect sizes first: the deciding comparisons of a tier arm per step, and what would settle the open ones.

Every row is a comparison a deciding rule made, with the interval that rule read (its family's confidence) and
the limit it was held against; nothing here is a new test:

* **improvement** rows: earns-its-keep, each (step, measure) against the arm without the newest tier, > 1 =
  better. ``improvement shown`` when the lower end reaches ``min_improvement x`` the step's noise floor; ``worse
  shown`` when the upper end lies below ``1 / floor`` (the other side of the same interval: the tier makes the
  measure worse beyond drift); ``short of the limit`` when the upper end lies below the limit; else ``not
  settled``; ``not judged`` when the interval is unresolved (too few requests for the percentile).
* **harm** rows: each regression rule's step against the baseline, > 1 = worse. ``harm shown`` when the lower end
  exceeds ``max_ratio x floor``, ``within limit`` when the upper end is at most ``max_ratio / floor``, else ``not
  settled``; ``not judged`` when the step could not resolve the percentile.
* ``host-contended`` (either kind): the step was over its host-contention budget
  (:mod:`harness.decision.rules.load_host`); shown, never deciding, nothing to settle by more load.

**What would settle an open comparison** (the power arithmetic of :mod:`harness.plan.power.resolve`, applied to the
measured interval): a percentile the step cannot resolve needs :func:`~harness.stats.intervals.min_samples_to_resolve`
requests on each side; a resolved interval that straddles its limit narrows as ``1 / sqrt(n)`` in log space, so with
the effect as measured (ratio ``r``, the near end at distance ``h`` from ``r``, the limit at distance ``d``) it
settles with ``(h / d)^2`` times the requests, at the same error rate. Time follows at the step's measured rate.

Where along the steps the tier starts to pay is :mod:`harness.decision.break_even`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from harness.config.rules import BudgetRule
from harness.decision.bounds import FLOOR_ABOVE_TOLERANCE, RegressionBounds
from harness.decision.decide import first_hold
from harness.decision.evaluate import ArmEvaluation, RegressionComparison
from harness.decision.rules.keep import KeepComparison, KeepEvaluation
from harness.decision.rules.load_host import REASON as HOST_CONTENDED
from harness.plan.power.resolve import duration_for
from harness.schema.findings import SettlePlan, SettleWay
from harness.schema.intervals import Percentiles, RatioCI
from harness.schema.summary import Decision, EffectRow, RuleResult, StepSummary
from harness.stats.intervals import min_samples_to_resolve

MAX_SETTLE_FACTOR = 100.0  # beyond this much more load an open comparison is, in practice, not settled by load
OPEN = ("not settled", "not judged")


def num(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def ratio_text(ci: RatioCI) -> str:
    """``1.51x [1.43, 1.60]``, or the point with "interval unresolved"."""
    if ci.resolved and ci.lo is not None and ci.hi is not None and ci.ratio is not None:
        return f"{ci.ratio:.2f}x [{ci.lo:.2f}, {ci.hi:.2f}]"
    return f"{ci.ratio:.2f}x, interval unresolved" if ci.ratio is not None else "unresolved"


def _source(step: StepSummary, n: int | None, n_versus: int | None, versus: str, ci: RatioCI) -> str:
    counts = f"{n} vs {n_versus} ({versus}) requests" if n is not None and n_versus is not None else "requests"
    method = f"{ci.method}, {ci.confidence:.1%}" if ci.method else f"{ci.confidence:.1%} interval"
    return f"requests.parquet, step {step.index} ({step.label}): {counts}; {method}"


def _row_base(step: StepSummary) -> dict[str, object]:
    return {"step": step.index, "label": step.label, "concurrency": step.concurrency, "rate_rps": step.rate_rps}


# --- the rows -------------------------------------------------------------------------------------------------


def keep_outcome(c: KeepComparison) -> str:
    """What one earns-its-keep comparison shows (see module docs)."""
    if c.contended is not None:
        return "host-contended"
    if not c.resolved or c.ci.lo is None or c.ci.hi is None:
        return "not judged"
    if c.ci.lo >= c.need:
        return "improvement shown"
    if c.ci.hi < 1.0 / c.floor:
        return "worse shown"
    if c.ci.hi < c.need:
        return "short of the limit"
    return "not settled"


def keep_rows(ev: KeepEvaluation, rule_label: str, min_improvement: float, versus: str) -> list[EffectRow]:
    """One row per earns-its-keep comparison."""
    rows = []
    for c in ev.comparisons:
        floor_text = f" x noise floor {c.floor:.3f}" if c.floor > 1.0 else ""
        outcome = keep_outcome(c)
        row = EffectRow.model_validate({
            **_row_base(c.step), "rule": rule_label, "test": "improvement", "measure": c.measure, "versus": versus,
            "interval": c.ci, "limit": round(c.need, 4), "floor": c.floor,
            "limit_text": f"min_improvement {min_improvement:.2f}{floor_text}", "outcome": outcome,
            "deciding": ev.winner is c, "n": c.n_mine, "n_versus": c.n_theirs,
            "source": _source(c.step, c.n_mine, c.n_theirs, versus, c.ci),
            "reason_code": HOST_CONTENDED if c.contended is not None else None})
        rows.append(row.model_copy(update={"settle": settle_text(row, c.step), "settle_plan": settle_plan(row, c.step)})
                    if outcome in OPEN else row)
    return rows


def _harm_outcome(result: RuleResult) -> str:
    if result.reason_code == HOST_CONTENDED:
        return "host-contended"
    if result.status == "breach":
        return "harm shown"
    if result.status == "pass":
        return "within limit"
    if result.status == "not-applicable" or result.interval is None or not result.interval.resolved:
        return "not judged"
    return "not settled"


def regression_rows(comparisons: Sequence[RegressionComparison], versus: str) -> list[EffectRow]:
    """One row per deciding regression rule and step (dry-run rules are second views: no row)."""
    rows = []
    for c in comparisons:
        if c.rule.dry_run:
            continue
        ci = c.result.interval or RatioCI(note=c.result.message)
        bounds = RegressionBounds(c.rule.max_ratio, c.floor)
        outcome = _harm_outcome(c.result)
        row = EffectRow.model_validate({
            **_row_base(c.step), "rule": c.rule.label, "test": "harm",
            "measure": f"p{c.rule.percentile:g} {c.rule.metric.upper()}", "versus": versus, "interval": ci,
            "limit": round(bounds.breach_bound, 4), "pass_limit": round(bounds.pass_bound, 4), "floor": c.floor,
            "limit_text": bounds.limit_text(), "outcome": outcome, "reason_code": c.result.reason_code,
            "n": c.n_mine, "n_versus": c.n_base, "source": _source(c.step, c.n_mine, c.n_base, versus, ci)})
        if outcome in OPEN:
            row = row.model_copy(update={"settle": settle_text(row, c.step, needed=c.needed),
                                         "settle_plan": settle_plan(row, c.step, needed=c.needed)})
        rows.append(row)
    return rows


def effect_rows(ev: ArmEvaluation, *, baseline: str, min_improvement: float | None) -> list[EffectRow]:
    """The arm's effect table: improvement rows (earns its keep), then harm rows (regression), each by step."""
    rows: list[EffectRow] = []
    if ev.keep is not None and ev.keep_versus is not None and min_improvement is not None:
        rows += keep_rows(ev.keep, ev.keep.result.rule, min_improvement, ev.keep_versus)
    rows += regression_rows(ev.regressions, baseline)
    return sorted(rows, key=lambda r: (r.test != "improvement", r.step))


# --- what would settle an open comparison --------------------------------------------------------------------


def _more(step: StepSummary, n: int, factor: float) -> str:
    """``~3.2x the requests (1,900 instead of 600; about 55 s instead of 16 s at this step's rate)``."""
    want = math.ceil(n * factor)
    rate = n / step.duration_s if step.duration_s > 0 and n > 0 else None
    at = (f"; about {duration_for(want, rate):.0f} s instead of {step.duration_s:.0f} s at this step's rate"
          if rate else "")
    return f"~{factor:.1f}x the requests ({want:,} instead of {n:,}{at})"


def _percentile_of(measure: str) -> float | None:
    """The quantile a latency measure reads (``ttft_p95`` -> 0.95, ``p90 TTFT`` -> 0.90), None for sums."""
    head = measure.split(" ", maxsplit=1)[0]
    if head.startswith("p"):
        text = head[1:]
    elif "_p" in measure:
        text = measure.rpartition("_p")[2]
    else:
        return None
    try:
        return float(text) / 100.0
    except ValueError:
        return None


def settle_factor(row: EffectRow) -> tuple[float | None, str]:
    """(requests factor that settles a resolved, open row with the effect as measured, which way it settles);
    (None, why) when more load cannot settle it."""
    ci = row.interval
    if not ci.resolved or ci.lo is None or ci.hi is None or ci.ratio is None or ci.ratio <= 0 or ci.lo <= 0:
        return None, "unresolved"
    r = math.log(ci.ratio)
    h_lo, h_hi = r - math.log(ci.lo), math.log(ci.hi) - r
    if row.test == "improvement":
        need = row.limit or 1.0
        if ci.ratio > need:
            return (h_lo / (r - math.log(need))) ** 2, "show the improvement"
        if ci.ratio < need:
            return (h_hi / (math.log(need) - r)) ** 2, "show it short of the limit"
        return None, "the measured ratio sits on the limit"
    limit, within = row.limit or 1.0, row.pass_limit or row.limit or 1.0
    if ci.ratio > limit:
        return (h_lo / (r - math.log(limit))) ** 2, "show the harm"
    if ci.ratio < within:
        return (h_hi / (math.log(within) - r)) ** 2, "show it within the limit"
    if row.reason_code == FLOOR_ABOVE_TOLERANCE:
        return None, (f"the measured ratio lies between {within:.3f} and {limit:.3f} and the noise floor "
                      f"{row.floor:.3f} exceeds the rule's tolerance: more load on this arm does not settle it; a "
                      "quieter host or a longer A/A (a lower floor) would")
    return None, (f"the measured ratio lies between {within:.2f} and {limit:.2f} (the limit divided and multiplied "
                  "by the noise floor): more load does not settle it")


def settle_text(row: EffectRow, step: StepSummary, *, needed: int | None = None) -> str | None:
    """What more load would settle an open row (None for a settled one)."""
    if row.outcome not in OPEN:
        return None
    n = min(row.n or 0, row.n_versus or 0)
    if row.outcome == "not judged" or not row.interval.resolved:
        q = _percentile_of(row.measure)
        want = needed if needed is not None else (
            min_samples_to_resolve(q, row.interval.confidence) if q is not None else None)
        if want is None or n <= 0:
            return "too few requests to put an interval on it"
        if want <= n:
            return None
        return (f"{want:,} requests on each side resolve its interval at {row.interval.confidence:.1%}: "
                f"{_more(step, n, want / n)}; whether it then clears the limit is open")
    factor, way = settle_factor(row)
    if factor is None:
        return way
    if factor > MAX_SETTLE_FACTOR:
        return (f"with the effect as measured, more than {MAX_SETTLE_FACTOR:.0f}x the requests would {way}: in "
                "practice more load does not settle it")
    return f"with the effect as measured, {_more(step, max(n, 1), max(factor, 1.0))} would {way}"


_WAYS: dict[str, SettleWay] = {"show the improvement": "show-improvement", "show it short of the limit": "show-short",
                               "show the harm": "show-harm", "show it within the limit": "show-within"}


def settle_plan(row: EffectRow, step: StepSummary, *, needed: int | None = None) -> SettlePlan | None:
    """:func:`settle_text` as figures: which way more load would settle an open row, and how much (None for a
    settled row)."""
    if row.outcome not in OPEN:
        return None
    n = min(row.n or 0, row.n_versus or 0)
    rate = n / step.duration_s if step.duration_s > 0 and n > 0 else None

    def load(factor: float, way: SettleWay) -> SettlePlan:
        want = math.ceil(n * factor)
        return SettlePlan(by_load=True, way=way, factor=round(factor, 3), requests=want,
                          seconds=duration_for(want, rate) if rate else None, step_seconds=step.duration_s)

    if row.outcome == "not judged" or not row.interval.resolved:
        q = _percentile_of(row.measure)
        want = needed if needed is not None else (
            min_samples_to_resolve(q, row.interval.confidence) if q is not None else None)
        if want is None or n <= 0:
            return SettlePlan(by_load=False, way="resolve-interval")
        return None if want <= n else load(want / n, "resolve-interval")
    factor, way = settle_factor(row)
    if factor is None or factor > MAX_SETTLE_FACTOR:
        return SettlePlan(by_load=False, way=_WAYS.get(way), factor=None if factor is None else round(factor, 1))
    n = max(n, 1)
    return load(max(factor, 1.0), _WAYS[way])


def keep_settle(rows: Sequence[EffectRow]) -> str | None:
    """What would settle an unresolved earns-its-keep: the cheapest open comparison that could show the
    improvement, else (every measured ratio short of its limit) what would show them all short."""
    open_rows = [r for r in rows if r.test == "improvement" and r.outcome in OPEN and r.settle]
    if not open_rows:
        return None
    towards: list[tuple[float, EffectRow]] = []
    for r in open_rows:
        factor, way = settle_factor(r)
        if factor is not None and way == "show the improvement":
            towards.append((factor, r))
    if towards:
        factor, best = min(towards, key=lambda t: t[0])
        return f"at {best.label}, {best.measure} {ratio_text(best.interval)} needs {best.limit:.2f}x: {best.settle}"
    worst = max(open_rows, key=lambda r: settle_factor(r)[0] or 0.0)
    return (f"no open comparison's measured ratio reaches its limit; the slowest to settle is {worst.measure} at "
            f"{worst.label} {ratio_text(worst.interval)}: {worst.settle}")


def settle_hints(rows: Sequence[EffectRow]) -> dict[tuple[str, int | None], str]:
    """For each open rule result (rule, step): what more load would settle it (earns its keep: ``step`` None)."""
    hints: dict[tuple[str, int | None], str] = {}
    for r in rows:
        if r.test == "harm" and r.settle:
            hints[(r.rule, r.step)] = r.settle
    keep = [r for r in rows if r.test == "improvement"]
    if keep:
        text = keep_settle(keep)
        if text:
            hints[(keep[0].rule, None)] = text
    return hints


def budget_hints(budgets: Sequence[BudgetRule], results: Sequence[RuleResult], steps: Sequence[StepSummary],
                 confidence: float) -> dict[tuple[str, int | None], str]:
    """For each unresolved budget rule: what more load would settle its per-step fallback, step by step (a
    percentile the step cannot bound needs :func:`~harness.stats.intervals.min_samples_to_resolve` requests; one
    whose interval straddles the budget narrows as ``1 / sqrt(n)`` in log space, with the value as measured)."""
    hints: dict[tuple[str, int | None], str] = {}
    for rule in budgets:
        result = next((r for r in results if r.kind == "budget" and r.rule == rule.label), None)
        if result is None or result.status != "unresolved" or result.threshold is None:
            continue
        parts = [p for st in steps if (p := _budget_step(rule, st, result.threshold, confidence))]
        if parts:
            hints[(rule.label, None)] = "; ".join(parts)
    return hints


def _budget_step(rule: BudgetRule, step: StepSummary, budget: float, confidence: float) -> str | None:
    key = f"p{rule.percentile:g}"
    perc = getattr(step, f"{rule.metric}_ms")
    if not isinstance(perc, Percentiles) or key not in ("p50", "p95", "p99"):
        return None
    ci, value = perc.ci(key), getattr(perc, key)
    n = ci.n if ci is not None else perc.count
    name = f"{key} {rule.metric.upper()}"
    if ci is None or value is None or n <= 0:
        return None
    if not ci.resolved or ci.lo is None or ci.hi is None:
        want = min_samples_to_resolve(rule.percentile / 100.0, confidence)
        return f"at {step.label}, {want:,} requests bound {name}: {_more(step, n, want / n)}" if want > n else None
    if ci.hi <= budget or ci.lo > budget or value <= 0 or ci.lo <= 0:
        return None  # settled at this step
    r, b = math.log(value), math.log(budget)
    if r == b:
        return f"at {step.label}, {name} sits on the budget: more load does not settle it"
    h = r - math.log(ci.lo) if r > b else math.log(ci.hi) - r
    factor = (h / abs(r - b)) ** 2
    way = "show it over the budget" if r > b else "show it within the budget"
    if factor > MAX_SETTLE_FACTOR:
        return f"at {step.label}, more than {MAX_SETTLE_FACTOR:.0f}x the requests would {way}"
    return f"at {step.label}, {name} as measured, {_more(step, n, max(factor, 1.0))} would {way}"


def mark_deciding(rows: Sequence[EffectRow], decision: Decision, rules: Sequence[RuleResult]) -> list[EffectRow]:
    """Rows that decided the arm: the winning improvement of a ``go`` (marked when made), every harm shown of a
    ``no-go``, and for a ``hold`` the comparisons of the rule that holds it (its first reason): earns its keep's
    open comparisons (or, when it is shown short, the best of them), a regression rule's open steps; none when
    what holds the arm is not a comparison (no own-tier hits, the fit screen, a budget)."""
    if decision == "go":
        return list(rows)
    if decision == "no-go":
        return [r.model_copy(update={"deciding": r.outcome == "harm shown"}) for r in rows]
    held = first_hold(rules) if decision == "hold" else None

    def drove(row: EffectRow) -> bool:
        if held is None:
            return False
        if held.reason_code == HOST_CONTENDED:  # held by host contention: the comparisons it set aside
            return row.outcome == "host-contended" and (
                row.test == "improvement" if held.kind == "earns_keep" else
                held.kind == "regression" and row.test == "harm" and row.rule == held.rule)
        if held.kind == "earns_keep" and row.test == "improvement":
            return row.outcome in OPEN if held.status == "unresolved" else row.interval == held.interval
        return held.kind == "regression" and row.test == "harm" and row.rule == held.rule and row.outcome in OPEN

    return [r.model_copy(update={"deciding": drove(r)}) for r in rows]
