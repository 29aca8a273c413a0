"""Proof of state at an arm's start: judging counters, disk tiers and the probe; reading a disk tier."""

from __future__ import annotations

from pathlib import Path

from harness.host.labels import DISK_TIER_MARKER
from harness.run.cold_start import disk_tier_state, judge, probe_prompt, total_hits
from harness.schema.cold_start import ColdProbe, DiskTierState

ZERO = {"hit_tokens.gpu": 0.0, "hit_tokens.cpu": 0.0, "hit_tokens.disk": None, "hit_tokens.total": 0.0}


def test_all_zero_and_an_empty_tier_and_a_clean_probe_is_cold() -> None:
    proof = judge(ZERO, None, [DiskTierState(root_dir="/x")], ColdProbe(prompt_tokens=96, cached_tokens=0,
                                                                          hit_tokens_delta=0.0))
    assert proof.cold is True
    assert proof.checked == ["counters", "disk-tier", "probe"]
    assert any("hit_tokens.disk" in r for r in proof.reasons)  # not exposed: named, never read as 0


def test_nonzero_counters_are_not_cold_with_the_figure() -> None:
    proof = judge({**ZERO, "hit_tokens.gpu": 512.0}, None, [], ColdProbe(cached_tokens=0))
    assert proof.cold is False
    assert any("hit_tokens.gpu 512" in r for r in proof.reasons)


def test_a_warm_disk_tier_is_not_cold() -> None:
    proof = judge(ZERO, None, [DiskTierState(root_dir="/t", entries=3, bytes=300)], None)
    assert proof.cold is False
    assert any("/t held 3 files (300 bytes)" in r and "warm disk tier" in r for r in proof.reasons)


def test_a_probe_that_saw_cached_tokens_or_moved_the_counters_is_not_cold() -> None:
    assert judge(ZERO, None, [], ColdProbe(cached_tokens=16)).cold is False
    moved = judge(ZERO, None, [], ColdProbe(cached_tokens=None, hit_tokens_delta=32.0))
    assert moved.cold is False and any("rose by 32" in r for r in moved.reasons)


def test_nothing_checkable_is_unknown_not_cold() -> None:
    proof = judge({}, "metrics /metrics: HTTP 500", [], ColdProbe(error="HTTP 404"))
    assert proof.cold is None
    assert proof.checked == []
    assert len(proof.reasons) == 2


def test_disk_tier_state_skips_the_marker_and_counts_files(tmp_path: Path) -> None:
    assert disk_tier_state(str(tmp_path / "absent")).entries == 0
    (tmp_path / DISK_TIER_MARKER).write_text("marker")
    (tmp_path / "ns").mkdir()
    assert disk_tier_state(str(tmp_path)).entries == 0  # an empty namespace directory holds nothing
    (tmp_path / "ns" / "a.bin").write_bytes(b"x" * 10)
    (tmp_path / "ns" / "b.bin").write_bytes(b"y" * 5)
    state = disk_tier_state(str(tmp_path))
    assert (state.entries, state.bytes, state.truncated) == (2, 15, False)
    assert disk_tier_state(str(tmp_path), max_entries=1).truncated


def test_total_hits_prefers_the_total_series() -> None:
    assert total_hits({"hit_tokens.total": 5.0, "hit_tokens.gpu": 1.0}) == 5.0
    assert total_hits({"hit_tokens.total": None, "hit_tokens.gpu": 1.0, "hit_tokens.cpu": 2.0}) == 3.0
    assert total_hits({"hit_tokens.total": None}) is None


def test_probe_prompts_are_unique_from_the_first_word() -> None:
    a, b = probe_prompt(), probe_prompt()
    assert a.split()[:12] != b.split()[:12]
    assert len(a.split()) == 96
