"""Decisions per arm and the run's verdict.

Per arm in order: ``baseline``; then for each tier

* ``no-go`` — the tier itself shows harm: a resolved regression against the baseline, failures it brings, or a
  (critical) budget breach the arms without it do not share;
* ``slo-unmet`` — nothing speaks against the tier, but it breaks a budget the baseline (or the arm before it) breaks
  too: the SLO is not met by any arm, which is the SLO's (or the load's) problem, not the tier's;
* ``hold`` — the evidence does not decide: an unresolved rule, no shown improvement, no own-tier hits, a fit-screen
  warning;
* ``go`` — every deciding rule passed;
* ``failed`` — the arm could not start or died: it could not be judged (never reported as harm).

The recommended configuration is the last ``go`` arm in an unbroken chain from the baseline. The verdict is ``go``
when that is a tier arm; otherwise it follows the first tier arm that broke the chain: ``no-go`` for measured harm,
``slo-unmet`` for a shared breach, ``hold`` for missing evidence or an arm that could not be judged. ``failed`` when
the baseline itself did not run, and when any arm was stopped by the harness's own failure (phase ``harness``:
never the tier's fault; the run is incomplete until ``--resume`` redoes it).
Exit codes: go 0, no-go 1, hold 3, failed 4, slo-unmet 5.

Reasons come deciding rule first, every rule's sentence kept: for ``go`` the improvement that cleared
``min_improvement`` x the noise floor (earns its keep), then the comparisons that showed no harm, then the rest; for
``no-go`` the harm (a regression first, then failures, budgets, tier-health vetoes); for ``hold`` what is missing,
cause before credit (no own-tier hits, the fit screen, the improvement not shown, then what could not be judged),
an unresolved comparison followed by what more load would settle it. The verdict's sentence names the recommended
(or the breaking) arm's break-even load when one was computed.

A comparison at a host-contended step (reason code ``host-contended``,
:mod:`harness.decision.rules.load_host`) never decides: set aside it is ``not-applicable`` and listed among the
reasons as not deciding, with its figures and budget; with no clean step the rule is unresolved and holds the arm,
host contention first among what holds it (after no own-tier hits and the fit screen).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from harness.decision.findings import baseline_finding, failure_finding, finding, not_run_finding
from harness.decision.rules.load_host import REASON as HOST_CONTENDED
from harness.schema.findings import Finding, FindingRole, harm_rank, hold_rank, pass_rank
from harness.schema.findings import rule_role as _role
from harness.schema.summary import EXIT_CODES, ArmFailure, ArmSummary, Decision, RuleResult, Verdict


@dataclass(frozen=True)
class VerdictResult:
    """The run's outcome."""

    verdict: Verdict
    recommended_arm: str | None
    reason: str

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]


def mark_shared(rules: Sequence[RuleResult], shared_budgets: set[str]) -> list[RuleResult]:
    """Budget breaches that an arm without the tier breaks too are flagged ``shared_with_baseline``."""
    return [r.model_copy(update={"shared_with_baseline": True})
            if r.kind == "budget" and r.status == "breach" and r.rule in shared_budgets else r for r in rules]


def first_hold(rules: Sequence[RuleResult]) -> RuleResult | None:
    """The rule that holds a ``hold`` arm: its first reason (None when nothing holds it)."""
    holds = [r for r in rules if not r.dry_run and _role(r) == "hold"]
    return min(holds, key=hold_rank) if holds else None


class ArmDecision(NamedTuple):
    """One arm's decision, its reasons (sentences, deciding first) and the same reasons as data (findings, in the
    same order)."""

    decision: Decision
    reasons: list[str]
    findings: list[Finding]


def decide_arm(*, is_baseline: bool, failure: ArmFailure | None, ran: bool, rules: Sequence[RuleResult],
               prev_name: str | None, hints: Mapping[tuple[str, int | None], str] | None = None) -> ArmDecision:
    """The decision, its reasons (sentences with numbers) and its findings for one arm (``rules`` marked by
    :func:`mark_shared`), the deciding rule first. ``hints``: by (rule, step), what more load would settle an open
    comparison (:func:`harness.decision.effects.settle_hints`); appended to the reason of that unresolved rule."""
    if failure is not None and failure.phase == "harness":
        return ArmDecision("failed", [f"not judged: the harness itself failed (not the server, not the tier): "
                                      f"{failure.message}; `harness run --resume` redoes this arm"],
                           [failure_finding(failure)])
    if failure is not None:
        return ArmDecision("failed", [f"could not be judged: failed during {failure.phase}: {failure.message}"],
                           [failure_finding(failure)])
    if not ran:
        return ArmDecision("skipped", ["not run (excluded by --only, or the run stopped before it)"],
                           [not_run_finding()])
    hints = hints or {}
    indexed = list(enumerate(rules))
    deciding = [(i, r) for i, r in indexed if not r.dry_run]
    dry = [(i, r, f"(dry run, not deciding) {r.rule}: {r.message}") for i, r in indexed
           if r.dry_run and r.status == "breach"]
    if is_baseline:
        breaches = [(i, r, f"{r.rule}: {r.message}") for i, r in deciding if r.status == "breach"]
        return ArmDecision("baseline", ["the GPU-only baseline every tier is compared with",
                                        *[t for _, _, t in [*breaches, *dry]]],
                           [baseline_finding(), *[finding(r, i, "baseline") for i, r, _ in [*breaches, *dry]]])
    vetoes: list[_Item] = []
    holds: list[_Item] = []
    shared: list[_Item] = []
    warnings: list[_Item] = []  # tier-health warnings and host-contended comparisons: reported, never deciding
    for i, r in deciding:
        role = _role(r)
        if r.status == "not-applicable" and r.reason_code == HOST_CONTENDED:
            warnings.append((i, r, "not-deciding", f"not deciding — {r.rule}: {r.message}"))
        elif role == "warning":
            warnings.append((i, r, "warning", f"warning (not deciding) — {r.rule}: {r.message}"))
        elif role == "shared":
            shared.append((i, r, "shared", f"{r.rule}: {r.message} — {prev_name or 'the baseline'} breaks this "
                           "budget too: the SLO is not met by any arm, so the tier is not the cause"))
        elif role == "veto":
            vetoes.append((i, r, "veto", f"{'critical rule ' if r.critical else ''}{r.rule}: {r.message}"))
        elif role == "hold" and r.status == "unresolved":
            hint = hints.get((r.rule, r.step)) if r.reason_code != HOST_CONTENDED else None  # not load's to settle
            holds.append((i, r, "hold", f"{r.rule} unresolved: {r.message}"
                          + (f" — to settle it: {hint}" if hint else "")))
        elif role == "hold":
            not_critical = " (not critical)" if r.kind == "budget" else ""
            holds.append((i, r, "hold", f"{r.rule}{not_critical}: {r.message}"))
    held = _ranked(holds, hold_rank)
    dry_items: list[_Item] = [(i, r, "not-deciding", text) for i, r, text in dry]
    if vetoes:
        return _decided("no-go", [*_ranked(vetoes, harm_rank), *held,
                                  *shared, *warnings, *dry_items])
    if holds:
        return _decided("hold", [*held, *shared, *warnings, *dry_items])
    passes = _ranked([(i, r, "pass", f"{r.rule}: {r.message}") for i, r in deciding if r.status == "pass"],
                     pass_rank)
    if shared:
        return _decided("slo-unmet", [*shared, *passes, *warnings, *dry_items])
    items = [*passes, *warnings, *dry_items]
    return _decided("go", items) if items else ArmDecision("go", ["no rule objected"], [])


_Item = tuple[int, RuleResult, FindingRole, str]


def _ranked(items: list[_Item], rank: Callable[[RuleResult], float]) -> list[_Item]:
    return sorted(items, key=lambda item: rank(item[1]))


def _decided(decision: Decision, items: Sequence[_Item]) -> ArmDecision:
    """The decision with its reasons and findings from one ordered list."""
    return ArmDecision(decision, [text for *_, text in items], [finding(r, i, role) for i, r, role, _ in items])


def verdict(arms: Sequence[ArmSummary]) -> VerdictResult:
    """The run's verdict from the arms' decisions (in scenario order)."""
    harness = next((a for a in arms if a.failure is not None and a.failure.phase == "harness"), None)
    if harness is not None:  # the run is incomplete: no verdict about any tier until it is resumed
        return VerdictResult("failed", None, f"the run is incomplete: {harness.name} was not measured because the "
                             "harness itself failed (not the server, not the tier); resume the run to judge it")
    if not arms or arms[0].decision == "failed":
        why = arms[0].reasons[0] if arms else "no arms"
        return VerdictResult("failed", None, f"the baseline did not run to the end ({why}); nothing to compare with")
    recommended = arms[0].name
    breaker: ArmSummary | None = None
    for arm in arms[1:]:
        if arm.decision == "go":
            recommended = arm.name
            continue
        if arm.decision == "skipped":
            continue
        breaker = arm
        break
    if recommended != arms[0].name:
        shipped = next(a for a in arms if a.name == recommended)
        tail = f"; the next tier ({breaker.name}) is {breaker.decision}" if breaker is not None else ""
        return VerdictResult("go", recommended, f"ship {recommended}{_break_even(shipped)}{tail}")
    if breaker is None:
        return VerdictResult("hold", recommended, "the scenario has no tier arm that ran to decide on")
    first = (breaker.reasons[0] if breaker.reasons else breaker.decision) + _break_even(breaker, "; ")
    if breaker.decision == "no-go":
        return VerdictResult("no-go", recommended, f"keep {recommended}: {breaker.name} is no-go ({first})")
    if breaker.decision == "slo-unmet":
        return VerdictResult("slo-unmet", recommended, f"the SLO is not met by any arm: {first}")
    if breaker.decision == "failed":
        return VerdictResult("hold", recommended, f"keep {recommended} for now: {breaker.name} could not be judged "
                             f"({first})")
    return VerdictResult("hold", recommended, f"keep {recommended} for now: {breaker.name} is {breaker.decision} "
                         f"({first})")


def _break_even(arm: ArmSummary, sep: str = " — ") -> str:
    """The arm's break-even load for the verdict line ('' when none was computed)."""
    if arm.break_even is None or not arm.break_even.text:
        return ""
    return f"{sep}break-even of {arm.name}: {arm.break_even.text}"
