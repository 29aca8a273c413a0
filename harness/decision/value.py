"""What the tier is worth (the scenario's ``value:`` section): GPUs needed per arm for the demand, GPUs saved by the
tier, the tier's cost and its value per GiB of tier per month — each with its interval, its level and its source —
against the baseline and against the arm without the newest tier (:mod:`harness.decision.value_marginal`). Without
the section there is no value section: nothing is invented.

* **Per-server throughput** comes from :mod:`harness.decision.value_capacity`: capacity at the SLO from the capacity
  search (basis ``search``), else the goodput of the best fixed step (basis ``step-goodput``: not a capacity; at the
  arm's highest step it may understate what a server holds).
* **GPUs needed** = ``ceil(demand / per-server throughput)`` x GPUs per server (the arm's tensor-parallel size).
  The bounds map monotonically: the lower end comes from the throughput's upper end, the upper end from its lower
  end; an unbounded end leaves that end of GPUs needed open (``None``).
* **GPUs saved** = baseline needed - tier needed, with a conservative interval from the ends of the two:
  ``[base_lo - tier_hi, base_hi - tier_lo]``. Each arm's interval is made at ``1 - alpha/2`` so that the two
  together cover at least ``1 - alpha`` (Bonferroni; the arms are measured independently, one after the other):
  one arm's figures (throughput, GPUs needed, GPU and tier cost) are at ``1 - alpha/2``, figures of two arms (GPUs
  saved, net saving, value per GiB) at ``1 - alpha``.
* **Cost per month** = GPUs x ``gpu_hour_cost`` x 730 h. **Tier cost** is the fleet's: every server of the tier
  arm carries its own tier, so it is servers x (host GiB x ``host_memory_gib_month_cost`` + NVMe GiB x
  ``nvme_gib_month_cost``), servers = the arm's GPUs needed / GPUs per server (so it carries that interval).
  **Net saving** = GPUs saved x GPU cost - tier cost, conservatively ``[saved_lo x m - cost_hi, saved_hi x m -
  cost_lo]``; **value per GiB of tier per month** = net saving / the fleet's tier GiB, each end divided by the GiB
  that makes it most extreme (the bracket never narrows by the division).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from harness.config.arms import GIB, Arm
from harness.config.scenario import Scenario
from harness.config.value import HOURS_PER_MONTH, ValueSpec
from harness.decision.value_capacity import ArmCapacity, arm_capacities
from harness.decision.value_figures import difference, ends, gpus_needed, net, per_gib, scale
from harness.decision.value_marginal import marginal_value
from harness.rundir.entries import StepEntry
from harness.schema.capacity import CapacitySection
from harness.schema.summary import ArmSummary
from harness.schema.validation import ValidationRecord
from harness.schema.value import ArmValue, Figure, ValueSection

COMBINE = ("GPUs saved: a conservative interval from the ends of the two arms' GPUs-needed intervals "
           "[baseline (or the arm without the newest tier) low - tier high, its high - tier low]; each arm's "
           "interval at 1 - alpha/2, so the pair covers at least 1 - alpha (Bonferroni)")
NOTE = "What it is worth informs the decision; it does not change the verdict, which the rules judge."


def gpus_saved(base: Figure, tier: Figure, confidence: float) -> Figure:
    """Baseline needed - tier needed, with the conservative interval from the ends of each."""
    return difference(base, tier, confidence, "GPUs", f"baseline GPUs needed - this arm's; {COMBINE}")


def tier_gib(arm: Arm, summary: ArmSummary, validation: ValidationRecord | None) -> tuple[float, float | None, str]:
    """(host GiB, NVMe GiB or None when a disk tier has no size, where they came from)."""
    host, where = summary.cpu_tier_bytes / GIB, "host GiB as configured, no resolved size recorded"
    for result in validation.arms if validation is not None else []:
        got = result.resolved
        if result.arm != arm.name or got is None:
            continue
        if got.offload is not None and got.offload.cpu_bytes_to_use is not None:
            host, where = got.offload.cpu_bytes_to_use / GIB, "host GiB as the engine resolved it"
        elif got.engine.kv_offloading_size_gib is not None:
            host, where = got.engine.kv_offloading_size_gib, "host GiB as the engine resolved it"
    sizes = [t.size_gib for t in arm.fs_tiers()]
    nvme = None if any(s is None for s in sizes) else float(sum(s for s in sizes if s is not None))
    if sizes:
        where += "; NVMe GiB from the disk tiers' size_gib" if nvme is not None else \
            "; a disk tier has no size_gib, so its NVMe GiB is unknown"
    return host, nvme, where


def _tier_cost(spec: ValueSpec, host: float, nvme: float | None, servers: Figure | None,
               where: str) -> tuple[Figure | None, str | None]:
    """The fleet's tier cost per month: each of the arm's servers carries ``host`` + ``nvme`` GiB of tier."""
    if nvme is None:
        return None, "the disk tier has no size_gib: its cost and value per GiB are unknown"
    if host > 0 and spec.host_memory_gib_month_cost is None:
        return None, "value.host_memory_gib_month_cost is not set: the tier's cost and value per GiB are unknown"
    if nvme > 0 and spec.nvme_gib_month_cost is None:
        return None, "value.nvme_gib_month_cost is not set: the tier's cost and value per GiB are unknown"
    if servers is None:
        return None, "the arm's GPUs needed are unknown, so the number of servers carrying a tier is too"
    per_server = host * (spec.host_memory_gib_month_cost or 0.0) + nvme * (spec.nvme_gib_month_cost or 0.0)
    return scale(servers, per_server, 0.0, f"{spec.currency}/month",
                  f"servers (GPUs needed / GPUs per server) x per server {host:g} GiB host x "
                  f"{spec.host_memory_gib_month_cost or 0:g} + {nvme:g} GiB NVMe x {spec.nvme_gib_month_cost or 0:g} "
                  f"{spec.currency}/GiB-month; {where}"), None


def _arm_value(spec: ValueSpec, scenario: Scenario, arm: Arm, summary: ArmSummary, cap: ArmCapacity,
               base: ArmValue | None, confidence: float, validation: ValidationRecord | None) -> ArmValue:
    per_server = scenario.engine_for(arm).tensor_parallel_size
    month = spec.gpu_hour_cost * HOURS_PER_MONTH
    money = f"{spec.currency}/month"
    out = ArmValue(arm=arm.name, tier=arm.tier, gpus_per_server=per_server, capacity=cap.figure,
                   capacity_basis=cap.basis if cap.figure is not None else None, capacity_step=cap.step,
                   capacity_at_top_step=cap.at_top_step, notes=list(cap.notes))
    if cap.figure is not None:
        out.gpus_needed = gpus_needed(spec.demand, cap.figure, per_server)
        out.gpu_cost_per_month = scale(out.gpus_needed, month, 0.0, money,
                                        f"GPUs needed x {spec.gpu_hour_cost:g} {spec.currency}/GPU-hour x "
                                        f"{HOURS_PER_MONTH:g} h")
    if base is None:
        return out
    servers = None if out.gpus_needed is None else scale(out.gpus_needed, 1.0 / per_server, 0.0, "servers",
                                                         "GPUs needed / GPUs per server")
    out.host_tier_gib, out.nvme_tier_gib, out.tier_gib_source = tier_gib(arm, summary, validation)
    out.tier_cost_per_month, why = _tier_cost(spec, out.host_tier_gib, out.nvme_tier_gib, servers,
                                              out.tier_gib_source)
    if why:
        out.notes.append(f"{arm.name}: {why}")
    if base.gpus_needed is None or out.gpus_needed is None:
        out.notes.append(f"{arm.name}: GPUs saved need both this arm's and the baseline's GPUs needed")
        return out
    out.gpus_saved = gpus_saved(base.gpus_needed, out.gpus_needed, confidence)
    if out.tier_cost_per_month is None or servers is None:
        return out
    out.net_saving_per_month = net(out.gpus_saved, month, out.tier_cost_per_month, money,
                                    f"GPUs saved x {spec.gpu_hour_cost:g} {spec.currency}/GPU-hour x "
                                    f"{HOURS_PER_MONTH:g} h - the fleet's tier cost; ends from opposite ends")
    gib = out.host_tier_gib + (out.nvme_tier_gib or 0.0)
    if gib > 0:
        out.value_per_tier_gib_month = per_gib(out.net_saving_per_month, servers, gib,
                                                f"{spec.currency}/GiB-month",
                                                f"net saving / the fleet's tier GiB (servers x {gib:g} GiB)")
    return out


def sentence(spec: ValueSpec, base: ArmValue, arm: ArmValue, decision: str) -> str:
    """One tier arm (with its verdict, ``decision``) against the baseline, and against the arm without its newest
    tier where that is not the baseline, in words with every interval and its level."""
    if arm.gpus_needed is None or base.gpus_needed is None or arm.gpus_saved is None:
        return f"{arm.arm}: GPUs needed not known for both arms ({'; '.join(arm.notes) or 'see notes'})"
    text = (f"{arm.arm} ({decision}) needs {ends(arm.gpus_needed)} GPUs for {spec.demand:g} {spec.demand_unit}, "
            f"the baseline {ends(base.gpus_needed)}: {ends(arm.gpus_saved)} GPUs saved")
    if arm.value_per_tier_gib_month is not None and arm.net_saving_per_month is not None:
        text += (f"; net {ends(arm.net_saving_per_month)} {spec.currency}/month after the fleet's tier cost of "
                 f"{ends(arm.tier_cost_per_month, 2) if arm.tier_cost_per_month else '?'}: "
                 f"{ends(arm.value_per_tier_gib_month, 2)} {spec.currency} per GiB of tier per month")
    m = arm.marginal
    if m is not None and m.versus != base.arm and m.gpus_saved is not None:
        text += f"; against {m.versus} (without its newest tier): {ends(m.gpus_saved)} GPUs saved"
        if m.net_saving_per_month is not None and m.tier_cost_per_month is not None:
            text += (f", net {ends(m.net_saving_per_month)} {spec.currency}/month after "
                     f"{ends(m.tier_cost_per_month, 2)} {spec.currency}/month more tier")
        if m.value_per_tier_gib_month is not None:
            text += f": {ends(m.value_per_tier_gib_month, 2)} {spec.currency} per GiB of the added tier per month"
    return text


def value_section(scenario: Scenario, df: pd.DataFrame, all_df: pd.DataFrame, entries: Sequence[StepEntry],
                  arms: Sequence[ArmSummary], capacity: CapacitySection | None,
                  validation: ValidationRecord | None,
                  without_newest: Mapping[str, str] | None = None) -> ValueSection | None:
    """The summary's value section (None without the scenario's ``value:``). ``without_newest``: per tier arm, the
    arm without its newest tier (the one its earns-its-keep rule is judged against); each such arm also gets its
    value against that arm (``marginal``)."""
    spec = scenario.value
    if spec is None:
        return None
    confidence = scenario.rules.confidence
    level = 1.0 - (1.0 - confidence) / 2.0
    caps = arm_capacities(scenario, df, all_df, entries, capacity, spec.demand_unit, level)
    by_name = {a.name: a for a in arms}
    out: list[ArmValue] = []
    for index, (arm, cap) in enumerate(zip(scenario.arms, caps, strict=True)):
        summary = by_name.get(arm.name)
        if summary is None:
            continue
        base = out[0] if out and out[0].arm == scenario.arms[0].name else None
        if index > 0 and base is None:
            cap.notes.append(f"{arm.name}: the baseline has no summary, so nothing is saved against it")
        out.append(_arm_value(spec, scenario, arm, summary, cap, base, confidence, validation))
    valued = {a.arm: a for a in out}
    for mine in out[1:]:
        versus = valued.get((without_newest or {}).get(mine.arm, ""))
        if versus is not None:
            mine.marginal = marginal_value(spec, mine, versus, confidence)
    base = out[0] if out and out[0].arm == scenario.arms[0].name else None
    lines = [sentence(spec, base, a, by_name[a.arm].decision) for a in out[1:]] if base is not None else []
    return ValueSection(demand=spec.demand, demand_unit=spec.demand_unit, gpu_hour_cost=spec.gpu_hour_cost,
                        host_memory_gib_month_cost=spec.host_memory_gib_month_cost,
                        nvme_gib_month_cost=spec.nvme_gib_month_cost, currency=spec.currency,
                        hours_per_month=HOURS_PER_MONTH,
                        capacity_from="search" if capacity is not None else "step-goodput",
                        confidence=level, pair_confidence=confidence, method=COMBINE, arms=out, summary=lines,
                        note=NOTE)
