"""The capacity search's logic with synthetic probe outcomes: bracketing, unresolved probes, bounds, wording."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.config.search import SearchSpec, fmt_ms
from harness.decision.capacity import (
    Outcome,
    Probe,
    conclude,
    is_probe_index,
    judge,
    next_probe,
    probe_index,
    probe_label,
)
from harness.decision.capacity_summary import arm_capacity
from harness.schema.capacity import CapacityProbe
from harness.schema.intervals import QuantileCI


def spec(**over: object) -> SearchSpec:
    base: dict[str, object] = {"metric": "ttft", "percentile": 99, "budget_ms": 2000, "low": 4, "high": 128,
                               "resolution": 4, "max_probes": 20}
    base.update(over)
    return SearchSpec.model_validate(base)


def search(s: SearchSpec, kind: str, truth: Callable[[Probe], Outcome]) -> list[Probe]:
    """Run the search against an oracle; bounded by the spec's max_probes (asserted)."""
    probes: list[Probe] = []
    for _ in range(s.max_probes + 1):
        nxt = next_probe(s, kind, probes)
        if nxt is None:
            break
        probes.append(Probe(nxt.load, truth(nxt), nxt.extended))
    assert len(probes) <= s.max_probes
    return probes


def threshold(capacity: float) -> Callable[[Probe], Outcome]:
    return lambda p: "meets" if p.load <= capacity else "breaks"


@pytest.mark.parametrize("true_capacity", [4, 5, 17, 31, 32, 47, 48, 63, 100, 127])
def test_bracketing_finds_the_capacity_within_the_resolution(true_capacity: int) -> None:
    s = spec()
    probes = search(s, "concurrency", threshold(true_capacity))
    found = conclude(s, "concurrency", probes)
    assert found.status == "found" and found.complete
    assert found.capacity is not None and found.not_met is not None
    assert found.capacity <= true_capacity < found.not_met  # never claims more than the truth
    assert found.not_met - found.capacity <= 4
    assert all(4 <= p.load <= 128 and p.load == int(p.load) for p in probes)
    assert len({p.load for p in probes}) == len(probes)  # no load probed twice without a reason


def test_rising_probes_then_bisection_in_order() -> None:
    s = spec(resolution=4)
    loads = [p.load for p in search(s, "concurrency", threshold(48))]
    assert loads[:6] == [4, 8, 16, 32, 64, 48]  # expand x2 until one breaks, then bisect [32, 64]
    assert loads[6:] == [56, 52]
    assert conclude(s, "concurrency", search(s, "concurrency", threshold(48))).capacity == 48


def test_ratio_resolution_stops_when_the_bracket_is_that_narrow() -> None:
    s = spec(resolution="25%")
    found = conclude(s, "concurrency", search(s, "concurrency", threshold(50)))
    assert found.capacity is not None and found.not_met is not None
    assert found.not_met <= found.capacity * 1.25 and found.capacity <= 50 < found.not_met


def test_budget_nobody_meets_stops_after_the_lowest_load() -> None:
    s = spec()
    probes = search(s, "concurrency", lambda p: "breaks")
    assert [p.load for p in probes] == [4]
    found = conclude(s, "concurrency", probes)
    assert found.status == "none-met" and found.capacity is None and found.not_met == 4 and found.complete


def test_everyone_meets_at_the_top_of_the_range() -> None:
    s = spec(high=100)
    probes = search(s, "concurrency", lambda p: "meets")
    assert [p.load for p in probes] == [4, 8, 16, 32, 64, 100]  # clamped at high, never above it
    found = conclude(s, "concurrency", probes)
    assert found.status == "at-least-high" and found.capacity == 100


def test_unresolved_probe_is_rerun_once_longer_and_replaced() -> None:
    s = spec()
    seen: dict[float, int] = {}

    def truth(p: Probe) -> Outcome:
        seen[p.load] = seen.get(p.load, 0) + 1
        if p.load == 32 and not p.extended:
            return "unresolved"  # the longer re-run resolves it
        return "meets" if p.load <= 40 else "breaks"

    probes = search(s, "concurrency", truth)
    at32 = [p for p in probes if p.load == 32]
    assert [p.extended for p in at32] == [False, True] and seen[32] == 2
    found = conclude(s, "concurrency", probes)
    assert found.capacity is not None and 36 <= found.capacity <= 40


def test_still_unresolved_after_the_rerun_counts_as_not_meeting() -> None:
    s = spec()
    probes = search(s, "concurrency", lambda p: "meets" if p.load < 32 else "unresolved")
    found = conclude(s, "concurrency", probes)
    assert found.capacity is not None and found.capacity < 32 and found.not_met is not None
    assert found.not_met <= 32  # conservative: never claims the load it could not show
    extended = [p for p in probes if p.extended]
    assert extended and all(p.outcome == "unresolved" for p in extended)
    assert all(sum(1 for q in probes if q.load == p.load) <= 2 for p in probes)  # at most one re-run per load


def test_no_rerun_when_extend_factor_is_one() -> None:
    s = spec(extend_factor=1.0)
    probes = search(s, "concurrency", lambda p: "unresolved")
    assert [p.load for p in probes] == [4]
    assert conclude(s, "concurrency", probes).status == "none-met"


def test_max_probes_bounds_the_search_and_says_it_was_cut_short() -> None:
    s = spec(max_probes=4)
    probes = search(s, "concurrency", threshold(100))
    assert len(probes) == 4
    found = conclude(s, "concurrency", probes)
    assert found.status == "found" and not found.complete and found.capacity == 32


def test_a_load_that_met_above_one_that_did_not_is_not_trusted() -> None:
    s = spec()
    probes = [Probe(4, "meets"), Probe(8, "meets"), Probe(16, "breaks"), Probe(12, "breaks"), Probe(10, "meets"),
              Probe(32, "meets")]
    found = conclude(s, "concurrency", probes)
    assert found.capacity == 10 and found.not_met == 12


def test_rate_search_uses_fractional_loads() -> None:
    s = spec(low=0.5, high=20, resolution="10%")
    probes = search(s, "rate", threshold(3.3))
    found = conclude(s, "rate", probes)
    assert found.capacity is not None and found.not_met is not None
    assert found.capacity <= 3.3 < found.not_met <= found.capacity * 1.1 + 1e-9
    assert any(p.load != int(p.load) for p in probes)


def test_probe_indices_never_collide_with_steps_warmup_or_drills() -> None:
    indices = [probe_index(k) for k in range(200)]
    assert all(is_probe_index(i) for i in indices) and len(set(indices)) == 200
    assert not any(is_probe_index(i) for i in [*range(0, 50), -1, *(-2 - d for d in range(50))])
    assert probe_label("concurrency", 48.0) == "search-c48" and probe_label("rate", 2.5) == "search-r2.5"


def ci(lo: float | None, hi: float | None, n: int = 500) -> QuantileCI:
    return QuantileCI(lo=lo, hi=hi, resolved=lo is not None and hi is not None, n=n)


@pytest.mark.parametrize(("interval", "errors", "outcome"), [
    (ci(1500, 1900), 0, "meets"),
    (ci(1500, 2000), 0, "meets"),  # within means at or below
    (ci(2100, 2600), 0, "breaks"),
    (ci(1800, 2300), 0, "unresolved"),  # straddles the budget
    (ci(1200, None, n=200), 0, "unresolved"),  # too few samples to bound p99 from above
    (ci(2100, None, n=200), 0, "breaks"),  # the lower end alone shows it
    (ci(1500, 1900), 40, "breaks"),  # 8% failed: fast failures do not make a load meet
    (None, 0, "unresolved"),
])
def test_judge_reads_the_interval_against_the_budget(interval: QuantileCI | None, errors: int,
                                                     outcome: Outcome) -> None:
    assert judge(interval, 2000, 500, errors, 0.01)[0] == outcome


def test_judge_without_requests_is_unresolved() -> None:
    assert judge(None, 2000, 0, 0, 0.01) == ("unresolved", "no requests completed")


def probe(load: float, outcome: Outcome, lo: float | None, hi: float | None, extended: bool = False
          ) -> CapacityProbe:
    return CapacityProbe(step=-1000, label=f"search-c{int(load)}", load=load, requests=500, n=500,
                         value_ms=(lo or 0) + 10, ci=ci(lo, hi), outcome=outcome, extended=extended, reason="r")


def test_wording_of_a_budget_nobody_meets() -> None:
    cap = arm_capacity(spec(), "concurrency", "baseline", [probe(4, "breaks", 2300, 2900)])
    assert cap.status == "none-met" and cap.capacity is None
    assert cap.message.startswith("baseline: no probed load met p99 TTFT ≤ 2 s; the lowest, 4 users, had p99 ")
    assert "[2.3 s, 2.9 s]" in cap.message


def test_wording_of_a_found_capacity_and_of_the_top_of_the_range() -> None:
    found = arm_capacity(spec(resolution="100%"), "concurrency", "cpu",
                         [probe(4, "meets", 100, 200), probe(8, "meets", 300, 500), probe(16, "breaks", 2100, 2500)])
    assert found.capacity == 8 and found.complete
    assert found.message.startswith("cpu holds 8 users at p99 TTFT ≤ 2 s: p99 ")
    assert "16 users did not (breaks" in found.message
    top = arm_capacity(spec(low=4, high=8), "concurrency", "cpu", [probe(4, "meets", 1, 2), probe(8, "meets", 1, 2)])
    assert top.status == "at-least-high" and "at least 8 users (the top of the searched range)" in top.message


def test_fmt_ms() -> None:
    assert (fmt_ms(2000), fmt_ms(850.4), fmt_ms(1620), fmt_ms(None)) == ("2 s", "850 ms", "1.62 s", "?")


def test_the_latest_search_session_counts_in_run_order() -> None:
    from harness.decision.capacity_summary import probe_entries
    from harness.rundir.entries import ProbeSearch, StepEntry

    def entry(arm: str, k: int, session: int, load: float) -> StepEntry:
        return StepEntry(arm=arm, step=probe_index(k), label=f"search-c{int(load)}", start_ns=k, end_ns=k + 1,
                         search=ProbeSearch(session=session, load=load))

    entries = [StepEntry(arm="a", step=0, start_ns=0, end_ns=1), StepEntry(arm="a", step=-1, start_ns=0, end_ns=1),
               StepEntry(arm="a", step=-2, drill="restart", start_ns=0, end_ns=1),
               entry("a", 0, 1, 4), entry("a", 1, 1, 8),  # an interrupted first search ...
               entry("a", 2, 2, 4), entry("a", 3, 2, 8), entry("a", 4, 2, 16),  # ... done again after --resume
               entry("b", 0, 1, 4)]
    assert [e.step for e in probe_entries(entries, "a")] == [probe_index(2), probe_index(3), probe_index(4)]
    assert [e.step for e in probe_entries(entries, "b")] == [probe_index(0)]
    assert probe_entries(entries, "c") == []


def test_saturated_client_probes_are_named() -> None:
    busy = probe(8, "meets", 300, 500).model_copy(update={"client_saturated": True})
    cap = arm_capacity(spec(resolution="100%"), "concurrency", "cpu",
                       [probe(4, "meets", 100, 200), busy, probe(16, "breaks", 2100, 2500)])
    assert "the load generator was saturated at 8 users: those probes' latencies include client delay" in cap.message
