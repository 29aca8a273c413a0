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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.schema.summary import EXIT_CODES, ArmFailure, ArmSummary, Decision, RuleResult, Verdict

HOLD_KINDS = ("earns_keep", "causal", "fit")


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


def decide_arm(*, is_baseline: bool, failure: ArmFailure | None, ran: bool, rules: Sequence[RuleResult],
               prev_name: str | None) -> tuple[Decision, list[str]]:
    """The decision and its reasons (sentences with numbers) for one arm (``rules`` marked by :func:`mark_shared`)."""
    if failure is not None and failure.phase == "harness":
        return "failed", [f"not judged: the harness itself failed (not the server, not the tier): {failure.message}; "
                          "`harness run --resume` redoes this arm"]
    if failure is not None:
        return "failed", [f"could not be judged: failed during {failure.phase}: {failure.message}"]
    if not ran:
        return "skipped", ["not run (excluded by --only, or the run stopped before it)"]
    deciding = [r for r in rules if not r.dry_run]
    dry = [f"(dry run, not deciding) {r.rule}: {r.message}" for r in rules if r.dry_run and r.status == "breach"]
    if is_baseline:
        breaches = [f"{r.rule}: {r.message}" for r in deciding if r.status == "breach"]
        return "baseline", ["the GPU-only baseline every tier is compared with", *breaches, *dry]
    vetoes: list[str] = []
    holds: list[str] = []
    shared: list[str] = []
    warnings: list[str] = []  # tier-health warnings: reported, never deciding
    for r in deciding:
        if r.kind == "tier_health" and not r.critical:
            if r.status in ("breach", "unresolved"):
                warnings.append(f"warning (not deciding) — {r.rule}: {r.message}")
            continue
        if r.status == "breach":
            if r.kind == "budget" and r.shared_with_baseline:
                shared.append(f"{r.rule}: {r.message} — {prev_name or 'the baseline'} breaks this budget too: the "
                              "SLO is not met by any arm, so the tier is not the cause")
            elif r.kind in HOLD_KINDS:
                holds.append(f"{r.rule}: {r.message}")
            elif r.kind == "budget" and not r.critical:
                holds.append(f"{r.rule} (not critical): {r.message}")
            else:
                tag = "critical rule " if r.critical else ""
                vetoes.append(f"{tag}{r.rule}: {r.message}")
        elif r.status == "unresolved":
            holds.append(f"{r.rule} unresolved: {r.message}")
    if vetoes:
        return "no-go", [*vetoes, *holds, *shared, *warnings, *dry]
    if holds:
        return "hold", [*holds, *shared, *warnings, *dry]
    passes = [f"{r.rule}: {r.message}" for r in deciding if r.status == "pass"]
    if shared:
        return "slo-unmet", [*shared, *passes, *warnings, *dry]
    return "go", [*passes, *warnings, *dry] or ["no rule objected"]


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
        tail = f"; the next tier ({breaker.name}) is {breaker.decision}" if breaker is not None else ""
        return VerdictResult("go", recommended, f"ship {recommended}{tail}")
    if breaker is None:
        return VerdictResult("hold", recommended, "the scenario has no tier arm that ran to decide on")
    first = breaker.reasons[0] if breaker.reasons else breaker.decision
    if breaker.decision == "no-go":
        return VerdictResult("no-go", recommended, f"keep {recommended}: {breaker.name} is no-go ({first})")
    if breaker.decision == "slo-unmet":
        return VerdictResult("slo-unmet", recommended, f"the SLO is not met by any arm: {first}")
    if breaker.decision == "failed":
        return VerdictResult("hold", recommended, f"keep {recommended} for now: {breaker.name} could not be judged "
                             f"({first})")
    return VerdictResult("hold", recommended, f"keep {recommended} for now: {breaker.name} is {breaker.decision} "
                         f"({first})")
