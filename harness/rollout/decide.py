"""Decisions per arm and the run's verdict.

Per arm in order: ``baseline``; then for each tier ``go``, ``no-go`` (roll back: disable the newest tier), ``hold``
(inconclusive) or ``failed``. The recommended configuration is the last ``go`` arm in an unbroken chain from the
baseline. The verdict is ``go`` when that is a tier arm, otherwise the decision of the first tier arm that broke the
chain (a tier that could not even start is a ``no-go``); ``failed`` when the baseline itself failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.summary import EXIT_CODES, ArmFailure, ArmSummary, Decision, RuleResult, Verdict


@dataclass(frozen=True)
class VerdictResult:
    """The run's outcome."""

    verdict: Verdict
    recommended_arm: str | None
    reason: str

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]


def decide_arm(*, is_baseline: bool, failure: ArmFailure | None, ran: bool, rules: Sequence[RuleResult],
               prev_budget_breaches: set[str], prev_name: str | None) -> tuple[Decision, list[str]]:
    """The decision and its reasons (sentences with numbers) for one arm."""
    if failure is not None:
        return "failed", [f"failed during {failure.phase}: {failure.message}"]
    if not ran:
        return "skipped", ["not run (excluded by --only, or the run stopped before it)"]
    deciding = [r for r in rules if not r.dry_run]
    dry = [f"(dry run, not deciding) {r.rule}: {r.message}" for r in rules if r.dry_run and r.status == "breach"]
    if is_baseline:
        breaches = [f"{r.rule}: {r.message}" for r in deciding if r.status == "breach"]
        return "baseline", ["the GPU-only baseline every tier is compared with", *breaches, *dry]
    vetoes: list[str] = []
    holds: list[str] = []
    notes: list[str] = []
    for r in deciding:
        if r.status == "breach":
            if r.kind == "budget" and not r.critical and r.rule in prev_budget_breaches:
                notes.append(f"{r.rule}: {r.message} — {prev_name} breaks this budget too, so the tier is not "
                             "the cause (noted, not deciding)")
            elif r.kind == "earns_keep":
                holds.append(f"{r.message}")
            else:
                tag = "critical rule " if r.critical else ""
                vetoes.append(f"{tag}{r.rule}: {r.message}")
        elif r.status == "inconclusive":
            holds.append(f"{r.rule} inconclusive: {r.message}")
    if vetoes:
        return "no-go", [*vetoes, *holds, *notes, *dry]
    if holds:
        return "hold", [*holds, *notes, *dry]
    passes = [f"{r.rule}: {r.message}" for r in deciding if r.status == "pass"]
    return "go", [*passes, *notes, *dry] or ["no rule objected"]


def verdict(arms: Sequence[ArmSummary]) -> VerdictResult:
    """The run's verdict from the arms' decisions (in scenario order)."""
    if not arms or arms[0].decision == "failed":
        why = arms[0].reasons[0] if arms else "no arms"
        return VerdictResult("failed", None, f"the baseline did not run to the end ({why}); nothing to compare with")
    recommended = arms[0].name
    breaker: ArmSummary | None = None
    for arm in arms[1:]:
        if arm.decision == "go":
            recommended = arm.name
            continue
        breaker = arm
        break
    if recommended != arms[0].name:
        tail = f"; the next tier ({breaker.name}) is {breaker.decision}" if breaker is not None else ""
        return VerdictResult("go", recommended, f"ship {recommended}{tail}")
    if breaker is None:
        return VerdictResult("hold", recommended, "the scenario has no tier arm to decide on")
    first = breaker.reasons[0] if breaker.reasons else breaker.decision
    if breaker.decision in ("no-go", "failed"):
        return VerdictResult("no-go", recommended, f"keep {recommended}: {breaker.name} is {breaker.decision} "
                             f"({first})")
    return VerdictResult("hold", recommended, f"keep {recommended} for now: {breaker.name} is {breaker.decision} "
                         f"({first})")
