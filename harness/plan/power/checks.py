"""The ``power`` checks of ``harness plan``: warn before a run that cannot decide.

* a regression rule's percentile that a step cannot resolve at the rule's test level (that step is not judged; with
  no step able to, the rule stays unresolved and the arm holds);
* a budget whose percentile no step can resolve (windows hold fewer requests still: the rule cannot settle);
* an earns-its-keep rule none of whose measures any step resolves (the tier can never be shown to pay: hold).

Each warning names the fix: the step duration that would suffice at the estimated rate, or the highest percentile
the planned steps resolve. Steps whose request count is unknown are left out (the power section says so).
"""

from __future__ import annotations

from collections.abc import Iterator

from harness.plan.power.model import PowerPlan, RuleResolution, StepPower
from harness.schema.summary import CheckItem

NAME = "power"


def _families(plan: PowerPlan) -> Iterator[tuple[str, str, list[tuple[StepPower, RuleResolution]]]]:
    """(kind, rule, [(step, result)]) per rule, in the order they appear."""
    seen: dict[tuple[str, str], list[tuple[StepPower, RuleResolution]]] = {}
    for step in plan.steps:
        for res in step.rules:
            seen.setdefault((res.kind, res.rule), []).append((step, res))
    for (kind, rule), items in seen.items():
        yield kind, rule, items


def _expect(step: StepPower) -> str:
    rate = (f" ({step.rps:g} req/s x {step.duration_s:g} s, {step.source})" if step.rps is not None and
            step.duration_s is not None else f" ({step.source})")
    return f"step {step.index} ({step.label}) expects ~{step.expected_requests}{rate}"


def _level(res: RuleResolution) -> str:
    if res.alpha_each is None:
        return f"at {res.confidence:.1%}"
    return f"at {res.confidence:.1%} (one-sided {res.alpha_each:.3g} per test)"


def _fix(items: list[tuple[StepPower, RuleResolution]], allow_lower: bool) -> str:
    durations = [f"step {s.index} {r.duration_needed_s:g} s" for s, r in items if r.duration_needed_s is not None]
    parts = ["longer steps at the estimated rates: " + ", ".join(durations)] if durations else []
    lowers = [r.lower_percentile for _, r in items]
    if allow_lower and lowers and all(p is not None for p in lowers):
        lowest = min(p for p in lowers if p is not None)
        parts.append(f"{'or ' if parts else ''}a lower percentile (p{lowest:g} resolves at each of these steps)")
    return "; fix: " + "; ".join(parts) if parts else ""


def _regression(rule: str, items: list[tuple[StepPower, RuleResolution]]) -> CheckItem:
    known = [(s, r) for s, r in items if r.resolved is not None]
    bad = [(s, r) for s, r in known if not r.resolved]
    head = f"regression {rule}: {items[0][1].measure} {_level(items[0][1])} needs {items[0][1].needed} requests per arm"
    if not bad:
        best = min(known, key=lambda item: item[1].detectable_ratio or float("inf"))
        det = (f"; a ratio of {best[1].detectable_ratio:.2f}x is flagged at step {best[0].index} (lognormal, see "
               "the power section)" if best[1].detectable_ratio else "")
        return CheckItem(name=NAME, level="ok", message=f"{head}: every step with a known rate resolves it{det}")
    where = "; ".join(_expect(s) for s, _ in bad)
    effect = ("no step can judge it: the rule stays unresolved and the tier arms hold" if len(bad) == len(known)
              else "those steps are not judged")
    return CheckItem(name=NAME, level="warn", message=f"{head}; {where}: {effect}{_fix(bad, allow_lower=True)}")


def _budget(rule: str, items: list[tuple[StepPower, RuleResolution]]) -> CheckItem:
    known = [(s, r) for s, r in items if r.resolved is not None]
    good = [s for s, r in known if r.resolved]
    first = items[0][1]
    head = f"budget {rule}: {first.measure} {_level(first)} needs {first.needed} requests"
    windows = [s.window for s, _ in known if s.window is not None and s.window.requests is not None]
    at = windows[0].bound(first.percentile) if windows else None
    win = ""
    if windows and at is not None:
        most = max(w.requests or 0.0 for w in windows)
        win = (f"; a {windows[0].window_s:g} s window holds up to ~{most:g} requests, so "
               + ("windows can bound it" if most >= at.needed else
                  "windows stay unresolved and the rule judges whole steps"))
    if good:
        return CheckItem(name=NAME, level="ok", message=f"{head}: resolved at step(s) "
                         f"{', '.join(f'{s.index} ({s.label})' for s in good)}{win}")
    where = "; ".join(_expect(s) for s, _ in known)
    fix = _fix([max(known, key=lambda item: item[0].index)], allow_lower=False)
    return CheckItem(name=NAME, level="warn", message=f"{head}; {where}: no step can resolve it, so the budget "
                     f"cannot pass or breach (unresolved){win}{fix}")


def _keep(items: list[tuple[StepPower, RuleResolution]]) -> CheckItem | None:
    known = [(s, r) for s, r in items if r.resolved is not None]
    if not known or any(r.resolved for _, r in known):
        return None
    measures = sorted({r.measure for _, r in known})
    return CheckItem(name=NAME, level="warn", message=f"earns-its-keep: no step resolves any of {', '.join(measures)} "
                     f"at the rule's test level: no tier can be shown to pay (hold){_fix(known, allow_lower=True)}")


def power_checks(plan: PowerPlan) -> list[CheckItem]:
    """The warnings (and the all-clear) of the power estimate."""
    out: list[CheckItem] = []
    for kind, rule, items in _families(plan):
        if all(r.resolved is None for _, r in items) or not any(r.deciding for _, r in items):
            continue  # nothing known, or a dry-run rule (reported, never decides: no reason to warn)
        if kind == "regression":
            out.append(_regression(rule, items))
        elif kind == "budget":
            out.append(_budget(rule, items))
        elif (item := _keep(items)) is not None:
            out.append(item)
    return out
