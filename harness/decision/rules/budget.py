"""The latency-budget rollback rule, three-valued: breach / pass / unresolved.

Each window's percentile — the rule's own, p50, p95 or p99 — is judged with its interval at that percentile
(order statistics, :mod:`harness.stats.intervals`): a *breach* when the whole interval lies above the budget, a
*pass* when it lies at or below, otherwise (or with fewer than ``min_requests_per_window`` requests) *unresolved*.
The rule:

* **breach** — ``breach_windows`` resolved breaches within some ``of_last`` consecutive windows (sustained);
* **pass** — there are at least ``breach_windows`` windows and no run of ``of_last`` of them could hold a sustained
  breach even if every unresolved window were a breach;
* otherwise the windows cannot settle it (at 95% a p99 needs 368 requests in a window to be bounded from above, a
  p95 72), and the rule judges each measured step's percentile instead (the step's interval at the same
  percentile): pass when every step is resolved at or below the budget, breach when a step lasting at least
  ``breach_windows`` windows is resolved above it, else **unresolved** — never a silent pass. A lower-load step too
  small to bound the percentile from above (but whose interval starts within the budget) counts as within when a
  higher-load step is resolved within it: steps rise, and latency rises with load (an assumption, stated in the
  rule's message).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from harness.config.rules import BudgetRule
from harness.schema.intervals import Percentiles, QuantileCI
from harness.schema.summary import RuleResult, StepSummary

WindowStatus = Literal["breach", "pass", "unresolved"]
Maker = Callable[[WindowStatus, str, "int | None"], RuleResult]


@dataclass(frozen=True)
class WindowValue:
    """One window's percentile and its interval for one metric."""

    index: int
    step: int
    start_s: float
    end_s: float
    requests: int
    value_ms: float | None
    ci: QuantileCI | None = None


@dataclass(frozen=True)
class BudgetOutcome:
    """The rule's result and the windows it breached / could not judge (indices into the arm's windows)."""

    result: RuleResult
    breached: list[int]
    unresolved: list[int]


def _fmt(ms: float | None) -> str:
    return "n/a" if ms is None else (f"{ms:.0f} ms" if ms >= 100 else f"{ms:.1f} ms")


def window_status(w: WindowValue, budget_ms: float, min_requests: int) -> WindowStatus:
    """One window against the budget."""
    if w.requests < min_requests or w.ci is None or w.value_ms is None:
        return "unresolved"
    if w.ci.lo is not None and w.ci.lo > budget_ms:
        return "breach"
    if w.ci.hi is not None and w.ci.hi <= budget_ms:
        return "pass"
    return "unresolved"


def _worst_span(status: list[WindowStatus], of_last: int, counted: set[WindowStatus]) -> tuple[int, int]:
    """(most windows in ``counted`` within any ``of_last`` consecutive windows, where that span ends)."""
    best, at = 0, -1
    for end in range(len(status)):
        span = status[max(0, end - of_last + 1): end + 1]
        hits = sum(1 for s in span if s in counted)
        if hits > best:
            best, at = hits, end
    return best, at


def _step_percentiles(step: StepSummary, metric: str) -> Percentiles:
    value = getattr(step, f"{metric}_ms")
    assert isinstance(value, Percentiles)
    return value


def evaluate_budget(rule: BudgetRule, budget_ms: float, windows: Sequence[WindowValue],
                    steps: Sequence[StepSummary], min_requests: int, window_s: float) -> BudgetOutcome:
    """Sustained-breach test over the arm's windows, with the per-step fallback (see module docs)."""
    status = [window_status(w, budget_ms, min_requests) for w in windows]
    breached = [w.index for w, s in zip(windows, status, strict=True) if s == "breach"]
    unresolved = [w.index for w, s in zip(windows, status, strict=True) if s == "unresolved"]
    pct = f"p{rule.percentile:g} {rule.metric.upper()}"
    sustained = f"sustained: {rule.breach_windows} of {rule.of_last} windows"

    def result(state: WindowStatus, message: str, step: int | None = None) -> RuleResult:
        return RuleResult(rule=rule.label, kind="budget", status=state, critical=rule.critical,
                          dry_run=rule.dry_run, step=step, message=message, threshold=budget_ms)

    hits, end = _worst_span(status, rule.of_last, {"breach"})
    if hits >= rule.breach_windows:
        span = list(zip(windows, status, strict=True))[max(0, end - rule.of_last + 1): end + 1]
        bad = [w for w, s in span if s == "breach"]
        worst = max(bad, key=lambda w: w.value_ms or 0.0)
        spans = ", ".join(f"{w.start_s:.0f}-{w.end_s:.0f} s ({_fmt(w.value_ms)}, interval from "
                          f"{_fmt(w.ci.lo if w.ci else None)})" for w in bad)
        return BudgetOutcome(result("breach", f"{pct} broke its {_fmt(budget_ms)} budget in {len(bad)} of "
                                    f"{len(span)} consecutive windows, each with its whole interval above the budget "
                                    f"({sustained}); windows {spans}; worst {_fmt(worst.value_ms)} at step "
                                    f"{worst.step}", worst.step), breached, unresolved)
    possible, _ = _worst_span(status, rule.of_last, {"breach", "unresolved"})
    # Fewer windows than a sustained breach needs cannot rule one out: the steps judge instead.
    if len(windows) >= rule.breach_windows and possible < rule.breach_windows:
        worst_val = max((w.value_ms or 0.0 for w in windows), default=0.0)
        return BudgetOutcome(result("pass", f"{pct} stayed within {_fmt(budget_ms)} ({sustained}, judged with each "
                                    f"window's interval): {len(breached)} isolated breach(es), {len(unresolved)} "
                                    f"unresolved of {len(windows)} windows; worst window {_fmt(worst_val)}", None),
                             breached, unresolved)
    return BudgetOutcome(_by_step(rule, budget_ms, steps, window_s, len(unresolved), len(windows), pct, result),
                         breached, unresolved)


def _covered_by_higher_load(rule: BudgetRule, budget_ms: float, steps: Sequence[StepSummary],
                            unsure: list[StepSummary], key: str) -> list[StepSummary]:
    """Unsure steps whose interval has a lower end within the budget and that ran at a lower load than some step
    whose whole interval is within it (steps rise, so their latency is bounded by that step's)."""
    def within(step: StepSummary) -> bool:
        ci = _step_percentiles(step, rule.metric).ci(key)
        return ci is not None and ci.hi is not None and ci.hi <= budget_ms

    resolved_at = [st.index for st in steps if within(st)]
    if not resolved_at:
        return []
    top = max(resolved_at)
    out = []
    for st in unsure:
        ci = _step_percentiles(st, rule.metric).ci(key)
        if ci is not None and ci.lo is not None and ci.lo <= budget_ms and st.index < top:
            out.append(st)
    return out


def _by_step(rule: BudgetRule, budget_ms: float, steps: Sequence[StepSummary], window_s: float, n_unresolved: int,
             n_windows: int, pct: str, result: Maker) -> RuleResult:
    """The per-step fallback when the windows cannot settle the rule."""
    why = (f"{n_unresolved} of {n_windows} windows could not be judged (too few requests to bound {pct} within a "
           f"{window_s:g} s window)") if n_windows >= rule.breach_windows else \
        (f"only {n_windows} window(s) of {window_s:g} s were measured, fewer than the {rule.breach_windows} a "
         "sustained breach needs")
    if not steps:
        return result("unresolved", f"{why}; no measured step to judge instead", None)
    lines, above, unsure = [], [], []
    key = f"p{rule.percentile:g}"
    for step in steps:
        perc = _step_percentiles(step, rule.metric)
        ci = perc.ci(key)
        value = getattr(perc, key, None)
        text = f"step {step.index} ({step.label}) {_fmt(value)}"
        if ci is None or value is None:
            unsure.append(step)
            lines.append(f"{text} (no samples)")
        elif ci.lo is not None and ci.lo > budget_ms:
            above.append(step)
            lines.append(f"{text} [{_fmt(ci.lo)}, {_fmt(ci.hi)}] above")
        elif ci.hi is not None and ci.hi <= budget_ms:
            lines.append(f"{text} [{_fmt(ci.lo)}, {_fmt(ci.hi)}] within")
        else:
            unsure.append(step)
            lines.append(f"{text} ({ci.note or 'interval straddles the budget'})")
    covered = _covered_by_higher_load(rule, budget_ms, steps, unsure, key)
    if covered:
        unsure = [st for st in unsure if st not in covered]
        lines.append(f"step(s) {', '.join(str(st.index) for st in covered)} cannot bound {pct} from above but ran "
                     "at lower load than a step resolved within the budget (latency rises with load)")
    detail = "; ".join(lines)
    long_enough = [s for s in above if s.duration_s >= rule.breach_windows * window_s * 0.999]
    if long_enough:
        worst = max(long_enough, key=lambda s: getattr(_step_percentiles(s, rule.metric), key) or 0.0)
        return result("breach", f"{pct} broke its {_fmt(budget_ms)} budget over whole steps: {why}, and judged "
                      f"per step: {detail}", worst.index)
    if not above and not unsure:
        return result("pass", f"{pct} within {_fmt(budget_ms)} at every step: {why}, so judged per step: "
                      f"{detail}", None)
    return result("unresolved", f"cannot tell whether {pct} stays within {_fmt(budget_ms)}: {why}; per step: "
                  f"{detail}", None)
