"""What the tier is worth (harness.decision.value): GPUs needed with bounds that map from capacity's opposite ends,
GPUs saved with the conservative interval, tier cost and value per GiB, the source of every figure, and nothing
without the scenario's ``value:`` section; the same against the arm without the newest tier (marginal value, which
may be negative and is then an informing finding), and the basis of the per-server figure. Records are synthetic: a
known rate per arm and step."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from harness.config.scenario import Scenario
from harness.decision.capacity import probe_index
from harness.decision.value import gpus_saved, value_section
from harness.decision.value_figures import gpus_needed
from harness.decision.value_marginal import negative_figure, with_value_findings
from harness.rundir.entries import ProbeSearch, StepEntry
from harness.schema.capacity import CapacityArm, CapacityProbe, CapacitySection
from harness.schema.summary import ArmSummary
from harness.schema.value import Figure
from harness.stats.block_rate import rate_interval
from tests.unit.config.config_scenarios import load_with

SEC = 1_000_000_000
ARMS = [{"name": "baseline", "tier": "gpu-only"},
        {"name": "cpu", "tier": "cpu", "offload": {"kind": "vllm-native", "kv_offloading_size_gib": 8}},
        {"name": "disk", "tier": "tiered", "offload": {
            "kind": "vllm-connector", "spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": 8 << 30,
            "secondary_tiers": [{"root_dir": "/tmp/kv-value", "size_gib": 100}]}}]
VALUE = {"requests_per_s": 100, "gpu_hour_cost": 2.0, "host_memory_gib_month_cost": 3.0, "nvme_gib_month_cost": 0.5}


def scenario(value: dict[str, Any] | None = VALUE, **engine: Any) -> Scenario:
    sections: dict[str, Any] = {"arms": ARMS, "slo": {"ttft_p99_ms": 1000}}
    if engine:
        sections["engine"] = {"kind": "sim", "model": "m", "launcher": "process", **engine}
    return load_with(**({**sections, "value": value} if value is not None else sections))


def records(arm: str, step: int, rate: float, seconds: float, *, start_s: float = 0.0, slow_share: float = 0.0,
            attempt: int = 1) -> pd.DataFrame:
    """Evenly sent requests at ``rate``/s; ``slow_share`` of them (every k-th) break the TTFT SLO."""
    n = int(rate * seconds)
    send = (start_s + (np.arange(n) + 0.5) / rate) * SEC
    slow = np.zeros(n, dtype=bool)
    if slow_share > 0:
        slow[:: max(1, round(1 / slow_share))] = True
    return pd.DataFrame({"arm": arm, "step": step, "attempt": attempt, "send_ns": send.astype(np.int64), "ok": True,
                         "ttft_ms": np.where(slow, 5000.0, 100.0), "e2e_ms": 500.0, "itl_ms_mean": 10.0,
                         "output_tokens_eff": 20.0})


def entry(arm: str, step: int, seconds: float, *, start_s: float = 0.0, **extra: Any) -> StepEntry:
    return StepEntry(arm=arm, step=step, label=extra.pop("label", f"c{step}"), start_ns=int(start_s * SEC),
                     end_ns=int((start_s + seconds) * SEC), **extra)


def arm_summaries(s: Scenario) -> list[ArmSummary]:
    return [ArmSummary(name=a.name, tier=a.tier, decision="baseline" if i == 0 else "hold",
                       cpu_tier_bytes=a.cpu_tier_bytes()) for i, a in enumerate(s.arms)]


def goodput_run(s: Scenario, disk: tuple[float, float] = (15.0, 25.0)) -> tuple[pd.DataFrame, list[StepEntry]]:
    """Two fixed steps per arm; the baseline serves 10 good requests/s at its best step, the CPU arm 20 and the disk
    arm the best of ``disk`` (25 by default)."""
    rates = {"baseline": (10.0, 8.0), "cpu": (12.0, 20.0), "disk": disk}
    frames, entries = [], []
    for arm, per_step in rates.items():
        for step, rate in enumerate(per_step):
            frames.append(records(arm, step, rate, 30, start_s=step * 30))
            entries.append(entry(arm, step, 30, start_s=step * 30))
    return pd.concat(frames, ignore_index=True), entries


def test_gpus_needed_rounds_up_to_servers_and_maps_the_ends_from_the_opposite_ends() -> None:
    cap = Figure(value=30.0, lo=24.0, hi=40.0, unit="requests/s", confidence=0.975, source="x")
    need = gpus_needed(100.0, cap, per_server=2)
    # ceil(100/30) = 4 servers; the upper end from the lower capacity ceil(100/24) = 5; the lower from 40: 3.
    assert (need.value, need.lo, need.hi) == (8.0, 6.0, 10.0) and need.unit == "GPUs"
    assert "2 GPU(s) per server" in need.source and "per-server throughput: x" in need.source
    exact = gpus_needed(100.0, Figure(value=25.0, lo=0.0, hi=None, unit="requests/s", source="y"), 1)
    assert (exact.value, exact.lo, exact.hi) == (4.0, None, None)  # unbounded capacity ends leave GPUs open


def test_gpus_saved_takes_the_conservative_ends() -> None:
    base = Figure(value=10.0, lo=8.0, hi=13.0, unit="GPUs", confidence=0.975, source="b")
    tier = Figure(value=5.0, lo=4.0, hi=7.0, unit="GPUs", confidence=0.975, source="t")
    saved = gpus_saved(base, tier, 0.95)
    assert (saved.value, saved.lo, saved.hi, saved.confidence) == (5.0, 1.0, 9.0, 0.95)
    bracket = gpus_saved(base, tier.model_copy(update={"confidence": None, "hi": None}), 0.95)
    assert (bracket.lo, bracket.hi, bracket.confidence) == (None, 9.0, None)


def test_no_value_section_no_figures() -> None:
    s = scenario(value=None)
    df, entries = goodput_run(s)
    assert value_section(s, df, df, entries, arm_summaries(s), None, None) is None


def test_goodput_sizes_the_fleet_with_intervals_and_sources() -> None:
    s = scenario(tensor_parallel_size=2)
    df, entries = goodput_run(s)
    v = value_section(s, df, df, entries, arm_summaries(s), None, None)
    assert v is not None and v.capacity_from == "step-goodput" and v.confidence == pytest.approx(0.975)
    base, cpu, disk = v.arms
    assert base.capacity is not None and base.capacity.value == pytest.approx(10.0, rel=0.01)
    assert base.capacity.lo is not None and base.capacity.hi is not None
    assert base.capacity.lo <= 10.0 <= base.capacity.hi
    assert "goodput at step c0" in base.capacity.source and "no capacity search ran" in base.capacity.source
    assert "97.5%" in base.capacity.source
    # Evenly sent requests: every slice holds the same count, so the interval is (nearly) the point.
    assert base.gpus_needed is not None and base.gpus_needed.value == 20.0  # ceil(100 / 10) servers x 2
    assert cpu.gpus_needed is not None and cpu.gpus_needed.value == 10.0
    assert cpu.gpus_saved is not None and cpu.gpus_saved.value == 10.0 and cpu.gpus_saved.confidence == 0.95
    assert any("highest step" in n for n in cpu.notes)  # best at its top step: may hold more
    assert not any("highest step" in n for n in base.notes)  # best at its lower step
    month = 2.0 * 730
    # Every server of a tier arm carries its own tier: 10 GPUs / 2 per server = 5 servers x 8 GiB x 3 a GiB-month.
    assert cpu.tier_cost_per_month is not None and cpu.tier_cost_per_month.value == pytest.approx(5 * 8 * 3.0)
    assert cpu.net_saving_per_month is not None
    assert cpu.net_saving_per_month.value == pytest.approx(10 * month - 120)
    assert cpu.value_per_tier_gib_month is not None
    assert cpu.value_per_tier_gib_month.value == pytest.approx((10 * month - 120) / (5 * 8))
    assert disk.gpus_needed is not None and disk.gpus_needed.value is not None
    servers = disk.gpus_needed.value / 2
    assert disk.tier_cost_per_month is not None
    assert disk.tier_cost_per_month.value == pytest.approx(servers * (8 * 3 + 100 * .5))
    assert disk.value_per_tier_gib_month is not None and disk.gpus_saved is not None
    assert disk.gpus_saved.value is not None
    assert disk.value_per_tier_gib_month.value == pytest.approx(
        (disk.gpus_saved.value * month - servers * 74) / (servers * 108))
    # The fleet's tier cost carries the servers' interval; the net saving's ends come from opposite ends.
    for arm in (cpu, disk):
        cost, net, saved = arm.tier_cost_per_month, arm.net_saving_per_month, arm.gpus_saved
        assert cost is not None and net is not None and saved is not None
        assert cost.lo is not None and cost.hi is not None and saved.lo is not None and saved.hi is not None
        assert net.lo == pytest.approx(saved.lo * month - cost.hi)
        assert net.hi == pytest.approx(saved.hi * month - cost.lo)
    for arm in (cpu, disk):
        for fig in (arm.gpus_needed, arm.gpus_saved, arm.net_saving_per_month, arm.value_per_tier_gib_month):
            assert fig is not None and fig.source and fig.lo is not None and fig.hi is not None
            assert fig.value is not None and fig.lo <= fig.value <= fig.hi
    assert v.summary[0].startswith("cpu (hold) needs 10 [") and "GPUs saved" in v.summary[0]


def test_goodput_counts_only_requests_inside_the_slo() -> None:
    s = scenario()
    df = records("baseline", 0, 20.0, 30, slow_share=0.25)
    v = value_section(s, df, df, [entry("baseline", 0, 30)], arm_summaries(s)[:1], None, None)
    assert v is not None and v.arms[0].capacity is not None
    assert v.arms[0].capacity.value == pytest.approx(15.0, rel=0.01)  # 25% broke TTFT <= 1000 ms


def test_a_missing_unit_cost_leaves_the_tier_value_unknown_and_says_why() -> None:
    s = scenario(value={"requests_per_s": 100, "gpu_hour_cost": 2.0})
    df, entries = goodput_run(s)
    v = value_section(s, df, df, entries, arm_summaries(s), None, None)
    assert v is not None
    cpu = v.arms[1]
    assert cpu.gpus_saved is not None and cpu.tier_cost_per_month is None and cpu.value_per_tier_gib_month is None
    assert any("host_memory_gib_month_cost is not set" in n for n in cpu.notes)


def test_search_capacity_brackets_from_the_met_and_the_broken_probe() -> None:
    s = scenario()
    frames, entries, caps = [], [], []
    # The baseline meets at 8 users (serving 10 req/s) and breaks at 16 (12 req/s); the CPU tier meets at 16 (20/s)
    # and breaks at 32 (24/s). Each probe is a journaled step below PROBE_BASE with its load.
    for arm, probes in (("baseline", [(8, 10.0, "meets"), (16, 12.0, "breaks")]),
                        ("cpu", [(16, 20.0, "meets"), (32, 24.0, "breaks")])):
        results = []
        for k, (load, rate, outcome) in enumerate(probes):
            step = probe_index(k)
            frames.append(records(arm, step, rate, 20, start_s=100 + 20 * k))
            entries.append(entry(arm, step, 20, start_s=100 + 20 * k, label=f"search-c{load}",
                                 search=ProbeSearch(load=load)))
            results.append(CapacityProbe(step=step, label=f"search-c{load}", load=load, outcome=outcome))
        caps.append(CapacityArm(arm=arm, status="found", capacity=probes[0][0], not_met=probes[1][0], complete=True,
                                probes=results))
    section = CapacitySection(metric="ttft", percentile=99, budget_ms=1000, kind="concurrency", low=8, high=32,
                              arms=[*caps, CapacityArm(arm="disk", status="not-run")])
    s = s.model_copy(update={"steps": s.steps.model_copy(update={"search": _search()})})
    all_df = pd.concat(frames, ignore_index=True)
    summaries = arm_summaries(s)
    v = value_section(s, all_df.iloc[0:0], all_df, entries, summaries, section, None)
    assert v is not None and v.capacity_from == "search"
    base, cpu, disk = v.arms
    assert base.capacity is not None and cpu.capacity is not None
    assert base.capacity.value == pytest.approx(10.0, rel=0.01) and base.capacity.hi == pytest.approx(12.0, rel=0.01)
    assert base.capacity.confidence is None and "capacity search at p99 TTFT" in base.capacity.source
    assert "at 8 users (met)" in base.capacity.source and "at 16 users (did not meet)" in base.capacity.source
    assert base.gpus_needed is not None and (base.gpus_needed.value, base.gpus_needed.lo) == (10.0, 9.0)
    assert cpu.gpus_needed is not None and (cpu.gpus_needed.value, cpu.gpus_needed.lo) == (5.0, 5.0)
    assert cpu.gpus_saved is not None and cpu.gpus_saved.value == 5.0 and cpu.gpus_saved.confidence is None
    assert disk.capacity is None and disk.gpus_needed is None and disk.gpus_saved is None
    assert any("did not run" in n for n in disk.notes)
    assert (base.capacity_basis, cpu.capacity_basis, disk.capacity_basis) == ("search", "search", None)


def _search() -> Any:
    from harness.config.search import SearchSpec
    return SearchSpec(budget_ms=1000, low=8, high=32)


def test_rate_interval_covers_a_known_poisson_rate() -> None:
    rng = np.random.default_rng(3)
    covered = 0
    for _ in range(200):
        n = int(rng.poisson(40 * 16))
        send = np.sort(rng.uniform(0, 16 * SEC, n))
        got = rate_interval(send, np.ones(n), 0, 16 * SEC, 0.95)
        assert got is not None and got.lo is not None and got.hi is not None
        covered += got.lo <= 40.0 <= got.hi
    assert 180 <= covered <= 199  # ~95% of 200
    few = rate_interval(np.array([1.0, 2.0]), np.ones(2), 0, SEC, 0.95)
    assert few is not None and not few.resolved and few.rate == 2.0


WITHOUT_NEWEST = {"cpu": "baseline", "disk": "cpu"}  # what summarize passes: each tier arm's earns-its-keep arm


def disk_worse_run(s: Scenario) -> tuple[pd.DataFrame, list[StepEntry]]:
    """The disk arm serves 16 good requests/s at its best step, the CPU arm 20: the disk arm needs more GPUs."""
    return goodput_run(s, disk=(15.0, 16.0))


def test_marginal_value_is_against_the_arm_without_the_newest_tier_and_may_be_negative() -> None:
    s = scenario(tensor_parallel_size=2)
    df, entries = disk_worse_run(s)
    v = value_section(s, df, df, entries, arm_summaries(s), None, None, WITHOUT_NEWEST)
    assert v is not None and v.pair_confidence == pytest.approx(0.95)
    base, cpu, disk = v.arms
    assert base.marginal is None
    # cpu: ceil(100 / 20) = 5 servers = 10 GPUs; disk: ceil(100 / 16) = 7 servers = 14 GPUs; the baseline 20.
    assert disk.gpus_saved is not None and disk.gpus_saved.value == 6.0  # against the baseline: it saves GPUs
    m = disk.marginal
    assert m is not None and m.versus == "cpu"
    assert m.gpus_saved is not None and m.gpus_saved.value == -4.0 and m.gpus_saved.confidence == 0.95
    assert (m.added_host_gib, m.added_nvme_gib) == (0.0, 100.0)
    # The change in the fleet's tier cost: 7 x (8 x 3 + 100 x 0.5) - 5 x 8 x 3 = 518 - 120.
    assert m.tier_cost_per_month is not None and m.tier_cost_per_month.value == pytest.approx(398.0)
    month = 2.0 * 730
    net = m.net_saving_per_month
    assert net is not None and net.value == pytest.approx(-4 * month - 398) and net.confidence == 0.95
    saved, cost = m.gpus_saved, m.tier_cost_per_month
    assert saved.lo is not None and saved.hi is not None and cost.lo is not None and cost.hi is not None
    assert net.lo == pytest.approx(saved.lo * month - cost.hi) and net.hi == pytest.approx(saved.hi * month - cost.lo)
    gib = m.value_per_tier_gib_month  # per GiB of the added tier on this arm's 7 servers
    assert gib is not None and gib.value == pytest.approx((-4 * month - 398) / (7 * 100))
    for fig in (saved, cost, net, gib):
        assert fig.lo is not None and fig.hi is not None and fig.value is not None and fig.lo <= fig.value <= fig.hi
    # The first tier arm's arm without its newest tier is the baseline: the same figures as against it.
    assert cpu.marginal is not None and cpu.marginal.versus == "baseline"
    got, want = cpu.marginal.gpus_saved, cpu.gpus_saved
    assert got is not None and want is not None
    assert (got.value, got.lo, got.hi, got.confidence) == (want.value, want.lo, want.hi, want.confidence)
    assert cpu.marginal.net_saving_per_month is not None and cpu.net_saving_per_month is not None
    assert cpu.marginal.net_saving_per_month.value == pytest.approx(cpu.net_saving_per_month.value)
    assert "against cpu (without its newest tier): -4 [" in v.summary[1]


def test_without_the_comparison_arms_no_marginal_value_is_invented() -> None:
    s = scenario()
    df, entries = disk_worse_run(s)
    v = value_section(s, df, df, entries, arm_summaries(s), None, None)
    assert v is not None and all(a.marginal is None for a in v.arms)


def test_a_negative_marginal_value_is_an_informing_finding_and_reason_that_changes_no_decision() -> None:
    s = scenario(tensor_parallel_size=2)
    df, entries = disk_worse_run(s)
    arms = arm_summaries(s)
    v = value_section(s, df, df, entries, arms, None, None, WITHOUT_NEWEST)
    assert v is not None
    out = with_value_findings(arms, v)
    base, cpu, disk = out
    assert (base, cpu) == (arms[0], arms[1])  # the CPU tier's value over the baseline is positive: nothing added
    assert [a.decision for a in out] == [a.decision for a in arms]
    found = disk.findings[-1]
    m = v.arms[2].marginal
    assert m is not None and (found.code, found.role, found.versus) == ("value-negative", "informs", "cpu")
    assert found.figure == m.net_saving_per_month and found.kind is None and found.rule is None
    assert len(disk.reasons) == len(arms[2].reasons) + 1 and len(disk.findings) == len(arms[2].findings) + 1
    assert with_value_findings(arms, None) == arms


def test_without_unit_costs_a_negative_marginal_gpu_count_is_the_finding() -> None:
    s = scenario(value={"requests_per_s": 100, "gpu_hour_cost": 2.0}, tensor_parallel_size=2)
    df, entries = disk_worse_run(s)
    v = value_section(s, df, df, entries, arm_summaries(s), None, None, WITHOUT_NEWEST)
    assert v is not None
    m = v.arms[2].marginal
    assert m is not None and m.net_saving_per_month is None and m.gpus_saved is not None
    assert negative_figure(m) == m.gpus_saved
    assert any("tier cost" in n for n in m.notes)


def test_the_per_server_figure_names_its_basis() -> None:
    s = scenario()
    df, entries = goodput_run(s)
    v = value_section(s, df, df, entries, arm_summaries(s), None, None)
    assert v is not None
    base, cpu, _disk = v.arms
    assert [a.capacity_basis for a in v.arms] == ["step-goodput"] * 3
    assert (base.capacity_step, base.capacity_at_top_step) == ("c0", False)  # best below its highest step
    assert (cpu.capacity_step, cpu.capacity_at_top_step) == ("c1", True)  # best at its highest: may understate
