"""What decided an arm, as data: the ordered findings of ``ArmSummary.findings`` and the load that would settle an
open comparison (``EffectRow.settle_plan``).

A finding is one rule result (or the arm's failure) with the role it played in the arm's decision, deciding
finding first, in the same order as the arm's ``reasons`` (which are its sentences). Readers that act on a
decision (CI, the headline, the index) read these fields; the sentences are for people.
"""

from __future__ import annotations

from typing import Literal, Protocol

from harness.schema.base import SchemaModel as _Model
from harness.schema.intervals import RatioCI

RuleKind = Literal["budget", "regression", "earns_keep", "drill", "errors", "causal", "fit", "noise_floor",
                   "tier_health"]
RuleStatus = Literal["pass", "breach", "unresolved", "not-applicable"]
ReasonCode = Literal["floor-above-tolerance", "host-contended"]

FindingRole = Literal["veto", "hold", "shared", "pass", "warning", "not-deciding", "failure", "not-run", "baseline"]
"""What a finding did to the arm's decision: ``veto`` (harm: no-go), ``hold`` (the evidence does not decide),
``shared`` (a budget the arm without the tier breaks too: slo-unmet), ``pass``, ``warning`` (a tier-health warning,
never deciding), ``not-deciding`` (set aside: a host-contended comparison), ``failure`` (the arm could not be
judged), ``not-run`` (skipped), ``baseline`` (the baseline's own budget breaches: reported, deciding nothing)."""

FindingCode = Literal[
    "harm-shown",            # a regression resolved beyond its limit
    "errors-raised",         # the arm brings failures (an exact test)
    "budget-breached",       # a budget the arms without the tier keep (critical: veto; not critical: hold)
    "budget-shared",         # a budget every arm breaks, the baseline included
    "tier-unhealthy",        # a tier-health rule breached (critical: veto; else a warning)
    "no-own-tier-hits",      # the tier served no hits: no causal path
    "fit-warning",           # the fit screen says the tier cannot help here
    "gain-not-shown",        # earns its keep: every interval short of the limit
    "gain-unresolved",       # earns its keep: an interval straddles the limit
    "harm-unresolved",       # a regression rule cannot tell
    "budget-unresolved",     # a budget the steps cannot bound
    "errors-unresolved",
    "host-contended",        # no clean step to judge on: the host, not the engine, slowed the run
    "floor-above-tolerance",  # the A/A noise floor exceeds the rule's tolerance
    "gain-shown",            # earns its keep: an improvement cleared its limit
    "within-limit",          # a regression rule: no harm beyond the limit
    "passed",                # any other rule that passed
    "arm-failed",            # could not start or died: not judged
    "harness-failed",        # the harness itself failed: the run is incomplete
    "not-run",
    "baseline",
]


class RuleOutcome(Protocol):
    """What :func:`finding_code` reads of a rule result (``harness.schema.summary.RuleResult``)."""

    @property
    def kind(self) -> RuleKind: ...
    @property
    def status(self) -> RuleStatus: ...
    @property
    def reason_code(self) -> ReasonCode | None: ...


_BREACH_CODES: dict[str, FindingCode] = {
    "regression": "harm-shown", "errors": "errors-raised", "budget": "budget-breached",
    "tier_health": "tier-unhealthy", "causal": "no-own-tier-hits", "fit": "fit-warning",
    "earns_keep": "gain-not-shown",
}
_UNRESOLVED_CODES: dict[str, FindingCode] = {
    "regression": "harm-unresolved", "errors": "errors-unresolved", "budget": "budget-unresolved",
    "earns_keep": "gain-unresolved", "tier_health": "tier-unhealthy",
}


def finding_code(r: RuleOutcome, role: FindingRole) -> FindingCode:
    """The finding's code: the reason code first (host contention, a noise floor above the tolerance), then what
    the rule's status means for its kind."""
    if r.reason_code == "host-contended":
        return "host-contended"
    if role == "shared":
        return "budget-shared"
    if r.status == "breach":
        return _BREACH_CODES.get(r.kind, "budget-breached")
    if r.status == "unresolved":
        if r.reason_code == "floor-above-tolerance":
            return "floor-above-tolerance"
        return _UNRESOLVED_CODES.get(r.kind, "budget-unresolved")
    if r.kind == "earns_keep" and r.status == "pass":
        return "gain-shown"
    if r.kind == "regression" and r.status == "pass":
        return "within-limit"
    return "passed"


class Finding(_Model):
    """One reason for an arm's decision, as data. ``rule_index`` points into the arm's ``rules`` (None for a
    failure or a skipped arm); ``bound`` is the figure the interval was held against in this outcome (the breach
    bound for harm, the pass bound otherwise)."""

    code: FindingCode
    role: FindingRole
    rule: str | None = None
    kind: RuleKind | None = None
    status: RuleStatus | None = None
    critical: bool = False
    step: int | None = None
    rule_index: int | None = None
    interval: RatioCI | None = None
    bound: float | None = None
    floor: float | None = None
    reason_code: ReasonCode | None = None
    phase: str | None = None  # a failure's phase (start, readiness, step, harness, ...)


SettleWay = Literal["show-improvement", "show-short", "show-harm", "show-within", "resolve-interval"]


class SettlePlan(_Model):
    """What more load would settle an open comparison, with the effect as measured: ``factor`` times the requests
    (``requests`` on the smaller side), about ``seconds`` at the step's measured rate; ``by_load`` False when more load
    cannot settle it (the ratio sits between the bounds, the noise floor exceeds the tolerance, > 100x)."""

    by_load: bool
    way: SettleWay | None = None
    factor: float | None = None
    requests: int | None = None
    seconds: float | None = None
    step_seconds: float | None = None
