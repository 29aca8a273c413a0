"""What a tier arm's newest tier is worth: the arm against the arm without its newest tier (the arm its
earns-its-keep rule compares with, ``versus``; the baseline for the first tier arm), beside its value against the
baseline (:mod:`harness.decision.value`).

* **GPUs saved** = versus's GPUs needed - this arm's, with the same conservative interval and Bonferroni level as
  against the baseline: ``[versus_lo - this_hi, versus_hi - this_lo]``, each arm's interval at ``1 - alpha/2``.
* **Tier cost** = the change in the fleet's tier cost, this arm's fleet tier cost - versus's
  (``[this_lo - versus_hi, this_hi - versus_lo]``); against a baseline without a tier it is this arm's own. With
  the same servers on both sides that is the servers x the added tier's per-server cost; where this arm needs more
  servers it includes the older tiers those extra servers carry too.
* **Net saving** = GPUs saved x GPU cost per month - that change, conservatively from opposite ends; **value per GiB
  of the added tier** = net saving / (this arm's servers x the GiB its newest tier adds per server).

Each figure may be negative and is reported as measured (never clipped). A negative marginal value becomes an
``informs`` finding (code ``value-negative``) and a reason of the arm, listed last: it never changes the verdict
(:data:`harness.decision.value.NOTE`).
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.config.value import HOURS_PER_MONTH, ValueSpec
from harness.decision.value_figures import difference, ends, minus, net, per_gib, scale
from harness.schema.findings import Finding
from harness.schema.summary import ArmSummary
from harness.schema.value import ArmValue, Figure, MarginalValue, ValueSection


def _tier_cost_change(mine: ArmValue, versus: ArmValue, level: float, money: str) -> Figure | None:
    """This arm's fleet tier cost - versus's (versus without a tier costs nothing); None when either is unknown."""
    cost = mine.tier_cost_per_month
    if cost is None:
        return None
    if versus.tier == "gpu-only":
        return cost.model_copy(update={"source": f"{versus.arm} carries no tier: this arm's fleet tier cost; "
                                                 f"{cost.source}"})
    if versus.tier_cost_per_month is None:
        return None
    return difference(cost, versus.tier_cost_per_month, level, money,
                      f"this arm's fleet tier cost - {versus.arm}'s (each: servers x per-server tier cost), "
                      "conservatively [this low - versus high, this high - versus low]")


def marginal_value(spec: ValueSpec, mine: ArmValue, versus: ArmValue, level: float) -> MarginalValue:
    """``mine`` against ``versus`` (the arm without its newest tier), at the pair's level ``level`` (1 - alpha)."""
    out = MarginalValue(versus=versus.arm)
    out.added_host_gib = mine.host_tier_gib - versus.host_tier_gib
    out.added_nvme_gib = minus(mine.nvme_tier_gib, versus.nvme_tier_gib)
    if mine.gpus_needed is None or versus.gpus_needed is None:
        out.notes.append(f"{mine.arm}: GPUs saved against {versus.arm} need both arms' GPUs needed")
        return out
    out.gpus_saved = difference(versus.gpus_needed, mine.gpus_needed, level, "GPUs",
                                f"{versus.arm} GPUs needed - this arm's, conservatively [{versus.arm} low - this "
                                f"high, {versus.arm} high - this low]; each arm's interval at 1 - alpha/2")
    money = f"{spec.currency}/month"
    out.tier_cost_per_month = _tier_cost_change(mine, versus, level, money)
    if out.tier_cost_per_month is None:
        out.notes.append(f"{mine.arm}: the tier cost of {mine.arm} or {versus.arm} is unknown, so the net saving "
                         f"against {versus.arm} is too")
        return out
    out.net_saving_per_month = net(out.gpus_saved, spec.gpu_hour_cost * HOURS_PER_MONTH, out.tier_cost_per_month,
                                   money, f"GPUs saved against {versus.arm} x {spec.gpu_hour_cost:g} "
                                   f"{spec.currency}/GPU-hour x {HOURS_PER_MONTH:g} h - the change in the fleet's "
                                   "tier cost; ends from opposite ends")
    added = (out.added_host_gib or 0.0) + (out.added_nvme_gib or 0.0)
    if out.added_nvme_gib is None or added <= 0:
        out.notes.append(f"{mine.arm}: its newest tier adds no known GiB over {versus.arm}, so there is no value "
                         "per GiB of it")
        return out
    servers = scale(mine.gpus_needed, 1.0 / mine.gpus_per_server, 0.0, "servers", "GPUs needed / GPUs per server")
    out.value_per_tier_gib_month = per_gib(out.net_saving_per_month, servers, added, f"{spec.currency}/GiB-month",
                                           f"net saving against {versus.arm} / this fleet's GiB of the added tier "
                                           f"(servers x {added:g} GiB)")
    return out


def negative_figure(m: MarginalValue) -> Figure | None:
    """The figure that makes the marginal value negative: the net saving's point below 0, else (no net: a unit cost
    missing) GPUs saved below 0; None when neither is."""
    if m.net_saving_per_month is not None:
        value = m.net_saving_per_month.value
        return m.net_saving_per_month if value is not None and value < 0 else None
    saved = m.gpus_saved
    return saved if saved is not None and saved.value is not None and saved.value < 0 else None


def value_reason(arm: str, m: MarginalValue, fig: Figure, currency: str) -> str:
    """The reason sentence of a negative marginal value (every interval with its level)."""
    what = f"net {ends(fig)} {currency}/month" if fig.unit.endswith("/month") else f"{ends(fig)} GPUs saved"
    tail = ""
    if m.gpus_saved is not None and fig is not m.gpus_saved:
        tail = f" ({ends(m.gpus_saved)} GPUs saved"
        if m.tier_cost_per_month is not None:
            tail += f", {ends(m.tier_cost_per_month, 2)} {currency}/month more tier"
        tail += ")"
    return (f"informs, not deciding — value: what {arm}'s newest tier adds over {m.versus} is negative: {what}"
            f"{tail}; what it is worth does not change the verdict")


def with_value_findings(arms: Sequence[ArmSummary], section: ValueSection | None) -> list[ArmSummary]:
    """The arms, each tier arm whose marginal value is negative with an ``informs`` finding and reason appended
    (last: it decides nothing)."""
    if section is None:
        return list(arms)
    marginal = {a.arm: a.marginal for a in section.arms if a.marginal is not None}
    out: list[ArmSummary] = []
    for arm in arms:
        m = marginal.get(arm.name)
        fig = negative_figure(m) if m is not None else None
        if m is None or fig is None:
            out.append(arm)
            continue
        found = Finding(code="value-negative", role="informs", versus=m.versus, figure=fig)
        out.append(arm.model_copy(update={"findings": [*arm.findings, found],
                                          "reasons": [*arm.reasons, value_reason(arm.name, m, fig,
                                                                                 section.currency)]}))
    return out
