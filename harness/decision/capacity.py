"""Capacity at SLO: which load to probe next, how a probe is judged, and what the probes conclude (pure logic).

A probe **meets** the budget when the upper end of its percentile's interval is within it, **breaks** it when the
lower end is above it (or more than ``max_error_rate`` of its requests failed), and is **unresolved** otherwise:
too few requests to bound the percentile, or an interval that straddles the budget. An unresolved probe is re-run
once at the same load for ``extend_factor`` times as long (more requests narrow the interval); the re-run's
outcome replaces it, and a re-run still unresolved counts as **not meeting** — a capacity is only claimed at a load
whose interval shows it, so the search errs low, never high.

The search is a bracket in load: probes rise from ``low`` by ``growth`` until one does not meet (or ``high``
meets), then bisect between the highest load that met and the lowest that did not, until the bracket is as narrow
as ``resolution``. It ends after ``max_probes`` probes whatever the bracket. The same functions run during the run
(to choose the next probe) and in ``harness report`` (to conclude from the journaled probes), so both agree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from harness.config.search import SearchSpec
from harness.schema.intervals import QuantileCI

Outcome = Literal["meets", "breaks", "unresolved"]
Status = Literal["found", "at-least-high", "none-met", "not-run"]
PROBE_BASE = -1000  # probe k (0-based, per arm) is journaled as step PROBE_BASE - k: below warm-up and drills


def probe_index(k: int) -> int:
    """The journal step index of an arm's ``k``-th probe (0-based); never a fixed step (>= 0), the warm-up (-1)
    or a drill (-2 - drill number)."""
    return PROBE_BASE - k


def is_probe_index(step: int) -> bool:
    """True for a step index :func:`probe_index` made."""
    return step <= PROBE_BASE


def probe_label(kind: str, load: float) -> str:
    """``search-c48`` (users) or ``search-r12.5`` (requests/s)."""
    return f"search-c{int(load)}" if kind == "concurrency" else f"search-r{load:g}"


@dataclass(frozen=True)
class Probe:
    """One probe's load and outcome; ``extended`` for the re-run of an unresolved probe."""

    load: float
    outcome: Outcome
    extended: bool = False


@dataclass(frozen=True)
class Bracket:
    """The highest load that met below the lowest that did not (either None when there is none)."""

    met: float | None
    not_met: float | None


@dataclass(frozen=True)
class Conclusion:
    """What the probes say: the capacity (highest load shown to meet), the bracket, and whether the search ran to
    its end (``complete``) or was cut short (``max_probes``, the time limit or the run ending)."""

    status: Status
    capacity: float | None
    not_met: float | None
    complete: bool


def judge(ci: QuantileCI | None, budget_ms: float, requests: int, errors: int,
          max_error_rate: float) -> tuple[Outcome, str]:
    """A probe's outcome and why, from its percentile's interval and its error share."""
    if requests <= 0:
        return "unresolved", "no requests completed"
    share = errors / requests
    if share > max_error_rate:
        return "breaks", f"{share:.1%} of requests failed (more than {max_error_rate:.1%})"
    if ci is None or ci.n == 0:
        return "unresolved", "no successful request to measure"
    if ci.lo is not None and ci.lo > budget_ms:
        return "breaks", "the whole interval is above the budget"
    if ci.hi is not None and ci.hi <= budget_ms:
        return "meets", "the whole interval is within the budget"
    if ci.hi is None:
        return "unresolved", ci.note or f"{ci.n} samples cannot bound the percentile from above"
    return "unresolved", "the interval straddles the budget"


def effective(probes: Sequence[Probe]) -> dict[float, Outcome]:
    """Per load, the outcome that counts: the last probe's (a re-run replaces the probe it extends)."""
    out: dict[float, Outcome] = {}
    for probe in probes:
        out[probe.load] = probe.outcome
    return out


def bracket(probes: Sequence[Probe]) -> Bracket:
    """Unresolved counts as not meeting; a load that met above one that did not is not trusted (latency is taken to
    rise with load, and the lower failure is the conservative reading)."""
    outcomes = effective(probes)
    not_met = min((load for load, o in outcomes.items() if o != "meets"), default=None)
    met = max((load for load, o in outcomes.items() if o == "meets" and (not_met is None or load < not_met)),
              default=None)
    return Bracket(met, not_met)


def _narrow(spec: SearchSpec, kind: str, met: float, not_met: float) -> bool:
    if kind == "concurrency" and not_met - met <= 1:
        return True
    if spec.resolution_abs is not None:
        return not_met - met <= spec.resolution_abs + 1e-9
    ratio = spec.resolution_ratio or 0.0
    return not_met <= met * (1.0 + ratio) + 1e-9


def _round(kind: str, load: float) -> float:
    if kind == "concurrency":
        return float(round(load))
    digits = 3 - math.floor(math.log10(abs(load))) if load > 0 else 3
    return round(load, max(0, digits))  # four significant figures for a rate


def _grow(spec: SearchSpec, kind: str, met: float) -> float:
    step = _round(kind, met * spec.growth)
    if kind == "concurrency":
        step = max(step, met + 1)
    return min(spec.high, step)


def next_probe(spec: SearchSpec, kind: str, probes: Sequence[Probe], *,
               count_limit: bool = True) -> Probe | None:
    """The next probe to run (its ``outcome`` is a placeholder), or None when the search is over.
    ``count_limit=False`` asks whether the search would go on without ``max_probes``."""
    if count_limit and len(probes) >= spec.max_probes:
        return None
    if not probes:
        return Probe(_round(kind, spec.low), "unresolved")
    last = probes[-1]
    if last.outcome == "unresolved" and not last.extended and spec.extend_factor > 1.0:
        return Probe(last.load, "unresolved", extended=True)
    b = bracket(probes)
    if b.met is None:
        return None  # the lowest load did not meet
    if b.not_met is None:
        return None if b.met >= spec.high else Probe(_grow(spec, kind, b.met), "unresolved")
    if _narrow(spec, kind, b.met, b.not_met):
        return None
    mid = _round(kind, (b.met + b.not_met) / 2.0)
    if not b.met < mid < b.not_met:
        return None
    return Probe(mid, "unresolved")


def conclude(spec: SearchSpec, kind: str, probes: Sequence[Probe]) -> Conclusion:
    """The search's result from its probes (the same whether read during the run or rebuilt from the journal)."""
    if not probes:
        return Conclusion("not-run", None, None, False)
    b = bracket(probes)
    complete = next_probe(spec, kind, probes, count_limit=False) is None
    if b.met is None:
        return Conclusion("none-met", None, b.not_met, complete)
    if b.not_met is None and b.met >= spec.high:
        return Conclusion("at-least-high", b.met, None, True)
    return Conclusion("found", b.met, b.not_met, complete)
