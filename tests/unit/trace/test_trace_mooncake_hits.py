"""On a Mooncake-format trace file, hit ratios at 1,000 / 10,000 / 50,000 blocks equal brute force (4 decimals)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.trace.bruteforce import simulate_hit_ratio
from harness.trace.cli import trace_app
from harness.trace.lru_curve import lru_curve
from harness.trace.mooncake import read_mooncake, synthesize_mooncake, write_mooncake
from harness.trace.readers import load_trace

CAPACITIES = (1_000, 10_000, 50_000)


@pytest.fixture(scope="module")
def mooncake_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("mooncake") / "trace.jsonl"
    requests = synthesize_mooncake(5_000, seed=42)
    # write every 7th request late, so file order is not time order: the analysis must sort by timestamp
    write_mooncake(path, [r for i, r in enumerate(requests) if i % 7] + requests[::7])
    return path


@pytest.fixture(scope="module")
def brute_force(mooncake_file: Path) -> dict[int, float]:
    requests = sorted(read_mooncake(mooncake_file).requests, key=lambda r: r.timestamp_ms)  # stable: ties in file order
    blocks = [list(r.hash_ids) for r in requests]
    return {c: simulate_hit_ratio(blocks, c) for c in CAPACITIES}


def test_trace_is_big_enough_to_exercise_50k_blocks(mooncake_file: Path) -> None:
    trace = load_trace(mooncake_file).trace
    assert len(set(trace.block_ids.tolist())) > 60_000
    assert 25 <= trace.n_blocks / trace.n_requests <= 35


def test_curve_hit_ratios_equal_brute_force(mooncake_file: Path, brute_force: dict[int, float]) -> None:
    curve = lru_curve(load_trace(mooncake_file).trace)
    for capacity in CAPACITIES:
        assert round(curve.block_ratio_at(capacity), 4) == round(brute_force[capacity], 4)
        assert curve.block_ratio_at(capacity) == pytest.approx(brute_force[capacity], abs=1e-12)
    # the three capacities sit on different parts of the curve
    ratios = [brute_force[c] for c in CAPACITIES]
    assert ratios[0] < ratios[1] < ratios[2]


def test_cli_json_reports_the_same_ratios(mooncake_file: Path, brute_force: dict[int, float]) -> None:
    result = CliRunner().invoke(trace_app, [str(mooncake_file), "--capacities", "1000,10000,50000", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    got = {row["capacity_blocks"]: row["hit_ratio"] for row in doc["capacities"]}
    assert {c: round(got[c], 4) for c in CAPACITIES} == {c: round(brute_force[c], 4) for c in CAPACITIES}
