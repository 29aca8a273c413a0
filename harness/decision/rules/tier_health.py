"""The tier-health rule: name a tier that drops stores or fails promotions under load.

Pure: it reads the per-step :class:`~harness.schema.tier_health.TierHealth` figures already in the arm's steps
(``steps[].server.tier_health``) and returns one :class:`~harness.schema.summary.RuleResult` of kind ``tier_health``.

* ``breach``: at some step with load, a limit of :class:`~harness.config.rules.TierHealthRule` was exceeded; the
  message names the tier(s) and the counts. ``critical`` is set when the scenario's ``action`` is ``veto``; with
  ``warn`` (the default) the breach is a warning that must not decide the arm.
* ``pass``: every judged step stayed within the limits (series the server did not expose are named).
* ``unresolved``: no step had any tier-health figure (missing series are never read as "no drops").
* ``not-applicable``: a GPU-only arm, or the rule is switched off.

A CPU-only arm (``CPUOffloadingSpec``) has no secondary tier: only its failed store allocations are judged.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.config.rules import TierHealthRule
from harness.schema.summary import RuleResult, StepSummary
from harness.schema.tier_health import TierHealth

RULE_NAME = "tier-health"


def _total(*values: float | None) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _checks(rule: TierHealthRule, th: TierHealth, tiered: bool) -> list[tuple[str, float | None, int]]:
    """(what, figure, limit) for one step."""
    checks = [("dropped stores", _total(th.stores_dropped, th.allocation_failures) if tiered
               else th.allocation_failures, rule.max_dropped_stores)]
    if tiered:
        checks += [("failed promotions", _total(th.promotion_failures, th.promotion_allocation_failures),
                    rule.max_failed_promotions),
                   ("failed cascades", th.cascade_failures, rule.max_failed_cascades)]
    return checks


def evaluate_tier_health(rule: TierHealthRule | None, arm: str, tier: str,
                         steps: Sequence[StepSummary]) -> RuleResult:
    """The tier-health rule for one arm (``tier``: the arm's ``gpu-only`` / ``cpu`` / ``tiered``)."""
    critical = rule is not None and rule.action == "veto"

    def result(status: str, message: str, step: int | None = None) -> RuleResult:
        return RuleResult.model_validate({"rule": RULE_NAME, "kind": "tier_health", "status": status,
                                          "critical": critical, "step": step, "message": message})

    if rule is None:
        return result("not-applicable", "the tier-health rule is switched off (rules.tier_health: null)")
    if tier == "gpu-only":
        return result("not-applicable", f"{arm} has no offload tier")
    tiered = tier == "tiered"
    loaded = [s for s in steps if s.requests > 0]
    breaches: list[str] = []
    first: int | None = None
    judged = 0
    unseen: dict[str, None] = {}
    for step in loaded:
        th = step.server.tier_health
        checks = _checks(rule, th, tiered)
        if any(v is not None for _what, v, _limit in checks):
            judged += 1
        over = [(what, v, limit) for what, v, limit in checks if v is not None and v > limit]
        for name in th.missing:
            unseen.setdefault(name, None)
        if over:
            first = step.index if first is None else first
            named = [p for p in th.problems() if tiered or p.startswith("CPU tier")]
            detail = "; ".join(named) or ", ".join(f"{v:.0f} {what}" for what, v, _limit in over)
            limits = ", ".join(f"{what} {v:.0f} > {limit}" for what, v, limit in over)
            breaches.append(f"step {step.label}: {detail} ({limits})")
    if breaches:
        tag = "veto" if critical else "warning (rules.tier_health.action: warn; not deciding)"
        return result("breach", f"{tag}: " + " | ".join(breaches), first)
    if not loaded:
        return result("unresolved", f"{arm} has no step with requests to judge tier health on")
    if judged == 0:
        names = ", ".join(unseen) or "the tier-health series"
        return result("unresolved", f"no tier-health figure at any step; looked for: {names}")
    what = "dropped no stores and failed no promotions or cascades" if tiered else "failed no store allocations"
    text = f"{arm}'s tiers {what} beyond the limits at {judged} of {len(loaded)} loaded steps"
    if unseen:
        text += f" (not exposed: {', '.join(unseen)})"
    return result("pass", text)
