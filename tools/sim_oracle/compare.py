"""Hold the simulator's replay against vLLM's, request by request, and count what was compared.

Per request: the step its lookup settled, its deferrals, whether it was aborted, the chunks it hit (and which of them
came from the fs tier), stored, evicted, promoted and cascaded, and its failed allocations; per run: the CPU tier's
replacement state at the end (LRU order; ARC's T1, T2, ghost lists and target) and the fs tier's keys.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from tools.sim_oracle.replay import Outcome, ReplayResult

FIELDS = ("step", "defers", "aborted", "hit", "hit_disk", "stored", "evicted", "promoted", "cascaded",
          "alloc_failures", "promote_failures")
LIST_FIELDS = ("hit", "hit_disk", "stored", "evicted", "promoted", "cascaded")


@dataclass(frozen=True)
class Difference:
    """One field of one request (or the final state, request ``*``) on which the two sides disagree."""

    sequence: str
    config: str
    request: str
    field: str
    sim: object
    vllm: object

    def __str__(self) -> str:
        return f"{self.sequence}/{self.config} {self.request} {self.field}: sim {self.sim!r} vs vLLM {self.vllm!r}"


@dataclass
class Comparison:
    """Counts over one run (vLLM's side) and the differences found."""

    sequence: str
    config: str
    requests: int = 0
    lookups: int = 0
    hits: int = 0
    disk_hits: int = 0
    stored: int = 0
    evicted: int = 0
    promoted: int = 0
    cascaded: int = 0
    alloc_failures: int = 0
    defers: int = 0
    aborted: int = 0
    differences: list[Difference] = field(default_factory=list)


def _count(comp: Comparison, out: Outcome) -> None:
    comp.requests += 1
    comp.hits += len(out.hit)
    comp.disk_hits += len(out.hit_disk)
    comp.stored += len(out.stored)
    comp.evicted += len(out.evicted)
    comp.promoted += len(out.promoted)
    comp.cascaded += len(out.cascaded)
    comp.alloc_failures += out.alloc_failures
    comp.defers += out.defers
    comp.aborted += int(out.aborted)


def compare(sim: ReplayResult, vllm: ReplayResult) -> Comparison:
    """Every field of every request, and the final state."""
    comp = Comparison(vllm.sequence, vllm.config, lookups=vllm.lookups)
    theirs = {o.id: o for o in vllm.outcomes}
    for ours in sim.outcomes:
        other = theirs.get(ours.id)
        if other is None:
            comp.differences.append(Difference(sim.sequence, sim.config, ours.id, "present", True, False))
            continue
        _count(comp, other)
        for name in FIELDS:
            a, b = getattr(ours, name), getattr(other, name)
            if name == "evicted":  # one eviction batch's order is the policy's scan; compare what left
                a, b = sorted(a), sorted(b)
            if a != b:
                comp.differences.append(Difference(sim.sequence, sim.config, ours.id, name, a, b))
    for key in sorted(set(sim.final) | set(vllm.final)):
        if sim.final.get(key) != vllm.final.get(key):
            comp.differences.append(Difference(sim.sequence, sim.config, "*", f"final.{key}", sim.final.get(key),
                                               vllm.final.get(key)))
    return comp


def summary(comps: Iterable[Comparison]) -> str:
    """One line: what was compared and how many differences."""
    comps = list(comps)
    total = Comparison("*", "*")
    for c in comps:
        for name in ("requests", "lookups", "hits", "disk_hits", "stored", "evicted", "promoted", "cascaded",
                     "alloc_failures", "defers", "aborted"):
            setattr(total, name, getattr(total, name) + getattr(c, name))
        total.differences += c.differences
    return (f"compared {total.requests} requests in {len(comps)} runs: {total.lookups} chunk lookups, "
            f"{total.hits} chunks hit ({total.disk_hits} from disk), {total.stored} stored, {total.evicted} evicted, "
            f"{total.promoted} promoted, {total.cascaded} cascaded, {total.alloc_failures} allocation failures, "
            f"{total.defers} deferrals, {total.aborted} aborts; {len(total.differences)} differences")
