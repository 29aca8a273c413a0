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
from harness.schema.value import Figure

RuleKind = Literal["budget", "regression", "earns_keep", "drill", "errors", "causal", "fit", "noise_floor",
                   "tier_health"]
RuleStatus = Literal["pass", "breach", "unresolved", "not-applicable"]
ReasonCode = Literal["floor-above-tolerance", "host-contended"]

FindingRole = Literal["veto", "hold", "shared", "pass", "warning", "not-deciding", "failure", "not-run", "baseline",
                      "informs"]
"""What a finding did to the arm's decision: ``veto`` (harm: no-go), ``hold`` (the evidence does not decide),
``shared`` (a budget the arm without the tier breaks too: slo-unmet), ``pass``, ``warning`` (a tier-health warning,
never deciding), ``not-deciding`` (set aside: a host-contended comparison), ``failure`` (the arm could not be
judged), ``not-run`` (skipped), ``baseline`` (the baseline's own budget breaches: reported, deciding nothing),
``informs`` (a figure no rule judges, e.g. what the tier is worth: listed last, never deciding)."""

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
    "value-negative",        # informs: what the newest tier adds over the arm without it is negative (value:)
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


class RoledRule(RuleOutcome, Protocol):
    """What :func:`rule_role` and the ranks read of a rule result."""

    @property
    def critical(self) -> bool: ...
    @property
    def shared_with_baseline(self) -> bool: ...


HOLD_KINDS: tuple[RuleKind, ...] = ("earns_keep", "causal", "fit")

# The order reasons are given in: the rule that decided comes first (for ``go`` the improvement that cleared its
# limit; for ``no-go`` the harm; for ``hold`` what is missing), then the rest by how directly they bear on it.
# Within a kind, rules keep their evaluation order (a regression rule's steps rise). The decision stage
# (``harness/decision/decide.py``) orders by these; the report reads a summary written before findings by them.
_HARM_ORDER: dict[str, int] = {"regression": 0, "errors": 1, "budget": 2, "tier_health": 3}
_HOLD_ORDER: dict[tuple[str, str], int] = {
    ("causal", "breach"): 0, ("fit", "breach"): 1, ("earns_keep", "breach"): 2, ("earns_keep", "unresolved"): 3,
    ("regression", "unresolved"): 4, ("errors", "unresolved"): 5, ("budget", "breach"): 6,
    ("budget", "unresolved"): 7}
_PASS_ORDER: dict[str, int] = {"earns_keep": 0, "regression": 1, "errors": 2, "causal": 3, "fit": 4, "budget": 5,
                               "tier_health": 6}

DecidingRole = Literal["veto", "hold", "shared", "warning", "pass", "none"]


def rule_role(r: RoledRule) -> DecidingRole:
    """What one deciding rule result does to a tier arm's decision."""
    if r.kind == "tier_health" and not r.critical:
        return "warning" if r.status in ("breach", "unresolved") else "none"
    if r.status == "breach":
        if r.kind == "budget" and r.shared_with_baseline:
            return "shared"
        if r.kind in HOLD_KINDS or (r.kind == "budget" and not r.critical):
            return "hold"
        return "veto"
    if r.status == "unresolved":
        return "hold"
    return "pass" if r.status == "pass" else "none"


def harm_rank(r: RuleOutcome) -> float:
    return _HARM_ORDER.get(r.kind, len(_HARM_ORDER))


def hold_rank(r: RuleOutcome) -> float:
    """Cause before credit: no causal path or a fit-screen warning first, then host contention (nothing measured
    can be charged to the engine), then the improvement not shown, then what could not be judged."""
    if r.reason_code == "host-contended":
        return 1.5
    return _HOLD_ORDER.get((r.kind, r.status), len(_HOLD_ORDER))


def pass_rank(r: RuleOutcome) -> float:
    return _PASS_ORDER.get(r.kind, len(_PASS_ORDER))


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
    versus: str | None = None  # value-negative: the arm without the newest tier it was valued against
    figure: Figure | None = None  # value-negative: the figure that is negative (net saving, else GPUs saved)


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
