"""The per-server throughput in the demand's unit (requests/s or output tokens/s), with an interval and its source,
for the ``value:`` section (:mod:`harness.decision.value`).

From the capacity search (``steps.search``) when it ran: the throughput of successful requests at the highest load
that met the search's budget (its lower end: the capacity at SLO is at least what that probe served) up to the
throughput at the lowest load that did not meet it (its upper end: beyond it the SLO broke). Each throughput's own
interval (batch means, :mod:`harness.stats.block_rate`) widens the bracket outward.

Without a search: the goodput of the fixed steps — requests (or their output tokens) that met every SLO, per
second — at the step where it is highest. That is not capacity at the SLO (basis ``step-goodput``, not ``search``): a
server never pushed past its highest step may hold more, so at that step the figure may understate capacity
(``at_top_step``), and the source line says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from harness.analysis.latency import float_column
from harness.analysis.steptable import within_slo
from harness.config.rules import SloSpec
from harness.config.scenario import Scenario
from harness.config.search import fmt_load, slo_text
from harness.decision.capacity_summary import probe_entries
from harness.rundir.attempts import row_attempts
from harness.rundir.entries import StepEntry
from harness.schema.capacity import CapacityArm, CapacitySection
from harness.schema.value import CapacityBasis, Figure
from harness.stats.block_rate import RATE_METHOD, RateCI, rate_interval


@dataclass
class ArmCapacity:
    """An arm's per-server figure (None: not measured), what it is (``basis``; for step goodput the ``step`` label
    and whether that is the arm's highest step, ``at_top_step``) and why it is absent, or what to keep in mind."""

    figure: Figure | None
    notes: list[str] = field(default_factory=list)
    basis: CapacityBasis | None = None
    step: str | None = None
    at_top_step: bool = False


def _rate(part: pd.DataFrame, entry: StepEntry, unit: str, good: np.ndarray, level: float) -> RateCI | None:
    weight = good.astype(np.float64)
    if unit == "output tokens/s":
        weight = weight * np.nan_to_num(float_column(part, "output_tokens_eff"))
    send = pd.to_numeric(part["send_ns"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    return rate_interval(send, weight, entry.start_ns, entry.end_ns, level)


def _slo_words(slo: SloSpec) -> str:
    parts = [f"{name} ≤ {budget:g} ms" for name, budget in (("TTFT", slo.ttft_p99_ms), ("ITL", slo.itl_p99_ms),
                                                            ("E2E", slo.e2e_p99_ms)) if budget is not None]
    return ", ".join(parts) if parts else "no SLO set: every successful request"


def _pct(level: float) -> str:
    return f"{level * 100:.3g}%"


def step_goodput(scenario: Scenario, df: pd.DataFrame, entries: Sequence[StepEntry], arm: str, unit: str,
                 level: float) -> ArmCapacity:
    """The arm's highest per-step goodput (requests or output tokens meeting every SLO, per second)."""
    spans = sorted((e for e in entries if e.arm == arm and e.measured), key=lambda e: e.step)
    if df.empty or not spans:
        return ArmCapacity(None, [f"{arm}: no measured step, so no goodput to size the fleet from"])
    mine = df[df["arm"] == arm]
    steps = pd.to_numeric(mine["step"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    rates: list[tuple[StepEntry, RateCI]] = []
    for entry in spans:
        part = mine[steps == entry.step]
        rate = _rate(part, entry, unit, within_slo(part, scenario.slo), level) if len(part) else None
        if rate is not None:
            rates.append((entry, rate))
    if not rates:
        return ArmCapacity(None, [f"{arm}: no step had requests, so no goodput to size the fleet from"])
    best, rate = max(rates, key=lambda pair: pair[1].rate)
    label = best.label or f"step {best.step}"
    what = "requests" if unit == "requests/s" else "output tokens of requests"
    source = (f"goodput at step {label} ({what} meeting every SLO: {_slo_words(scenario.slo)}, per second), the "
              f"highest of {len(rates)} fixed step(s); no capacity search ran (steps.search); {RATE_METHOD}, "
              f"{rate.blocks} slices, {_pct(level)}")
    notes = []
    if best.step == spans[-1].step:
        notes.append(f"{arm}: goodput was highest at the highest step ({label}): the server was not loaded past it "
                     "and may hold more, so its GPUs needed may be fewer (steps.search finds capacity at SLO)")
    if not rate.resolved:
        notes.append(f"{arm}: step {label} had too few good requests for an interval ({rate.blocks} slices)")
    return ArmCapacity(Figure(value=rate.rate, lo=rate.lo, hi=rate.hi, unit=unit, confidence=level,
                              source=source), notes, basis="step-goodput", step=label,
                       at_top_step=best.step == spans[-1].step)


def _probe_part(all_df: pd.DataFrame, entry: StepEntry) -> pd.DataFrame:
    arms = all_df["arm"].astype(str).to_numpy(dtype=object)
    steps = pd.to_numeric(all_df["step"], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    part: pd.DataFrame = all_df[(arms == entry.arm) & (steps == entry.step) & (row_attempts(all_df) == entry.attempt)]
    return part


def search_capacity(scenario: Scenario, all_df: pd.DataFrame, entries: Sequence[StepEntry], cap: CapacityArm,
                    kind: str, unit: str, level: float) -> ArmCapacity:
    """The arm's capacity at SLO from its search, as throughput of successful requests, with a bracket."""
    spec = scenario.steps.search
    if spec is None or cap.status == "not-run" or all_df.empty:
        return ArmCapacity(None, [f"{cap.arm}: its capacity search did not run, so GPUs needed are not known"])
    probes = probe_entries(entries, cap.arm)
    pairs = list(zip(probes, cap.probes, strict=False))

    def rate_at(load: float | None) -> tuple[StepEntry, RateCI | None] | None:
        hits = [(e, p) for e, p in pairs if p.load == load]
        if not hits:
            return None
        entry = hits[-1][0]
        part = _probe_part(all_df, entry)
        ok = part["ok"].to_numpy(dtype=bool) if len(part) else np.zeros(0, dtype=bool)
        return entry, _rate(part, entry, unit, ok, level) if len(part) else None

    met, bad = rate_at(cap.capacity), rate_at(cap.not_met)
    lo = met[1].lo if met is not None and met[1] is not None else None
    value = met[1].rate if met is not None and met[1] is not None else None
    hi = bad[1].hi if bad is not None and bad[1] is not None else None
    what = "successful requests" if unit == "requests/s" else "output tokens of successful requests"
    source = (f"capacity search at {slo_text(spec)} ({what} per second): lower end the {_pct(level)} lower bound of "
              f"the throughput at {fmt_load(kind, cap.capacity)} (met), upper end the upper bound at "
              f"{fmt_load(kind, cap.not_met)} (did not meet); {RATE_METHOD}; each probe judged at "
              f"{_pct(scenario.rules.confidence)}")
    notes = []
    if cap.status == "none-met":
        notes.append(f"{cap.arm}: no probed load met {slo_text(spec)}: only an upper bound on its capacity")
        source = (f"capacity search at {slo_text(spec)}: no probed load met; upper end the {_pct(level)} upper "
                  f"bound of the throughput at {fmt_load(kind, cap.not_met)}; {RATE_METHOD}")
    elif cap.status == "at-least-high":
        notes.append(f"{cap.arm}: met the SLO at the top of the searched range: its capacity has no upper end")
    if cap.status in ("found", "none-met") and not cap.complete:
        notes.append(f"{cap.arm}: the search stopped before its bracket reached the resolution")
    if value is None and lo is None and hi is None:
        return ArmCapacity(None, [*notes, f"{cap.arm}: no throughput could be measured at the search's bracket"])
    return ArmCapacity(Figure(value=value, lo=lo, hi=hi, unit=unit, confidence=None, source=source), notes,
                       basis="search")


def arm_capacities(scenario: Scenario, df: pd.DataFrame, all_df: pd.DataFrame, entries: Sequence[StepEntry],
                   capacity: CapacitySection | None, unit: str, level: float) -> list[ArmCapacity]:
    """Each arm's per-server figure, in scenario order: capacity at the SLO from the search when one ran, else the
    best fixed step's goodput (basis step-goodput)."""
    if capacity is not None:
        by_arm = {c.arm: c for c in capacity.arms}
        return [search_capacity(scenario, all_df, entries, by_arm[a.name], capacity.kind, unit, level)
                if a.name in by_arm else ArmCapacity(None, [f"{a.name}: not in the capacity search"])
                for a in scenario.arms]
    return [step_goodput(scenario, df, entries, a.name, unit, level) for a in scenario.arms]
