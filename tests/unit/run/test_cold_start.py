"""Proof of state at an arm's start: judging counters, disk tiers and the probe (a probe alone never proves); reading
a disk tier; the terminal line."""

from __future__ import annotations

from pathlib import Path

from harness.host.labels import DISK_TIER_MARKER
from harness.run.cold_start import disk_tier_state, judge, probe_prompt, terminal_line, total_hits
from harness.schema.cold_start import ColdProbe, DiskTierState

ZERO = {"hit_tokens.gpu": 0.0, "hit_tokens.cpu": 0.0, "hit_tokens.disk": None, "hit_tokens.total": 0.0}


def test_all_zero_and_an_empty_tier_and_a_clean_probe_is_cold() -> None:
    proof = judge(ZERO, None, [DiskTierState(root_dir="/x")], ColdProbe(prompt_tokens=96, cached_tokens=0,
                                                                          hit_tokens_delta=0.0))
    assert (proof.proof, proof.cold) == ("proven", True)
    assert proof.checked == ["counters", "disk-tier", "probe"]
    assert any("hit_tokens.disk" in r for r in proof.reasons)  # not exposed: named, never read as 0


def test_nonzero_counters_are_not_cold_with_the_figure() -> None:
    proof = judge({**ZERO, "hit_tokens.gpu": 512.0}, None, [], ColdProbe(cached_tokens=0))
    assert (proof.proof, proof.cold) == ("warm", False)
    assert any("hit_tokens.gpu 512" in r for r in proof.reasons)


def test_a_warm_disk_tier_is_not_cold() -> None:
    proof = judge(ZERO, None, [DiskTierState(root_dir="/t", entries=3, bytes=300)], None)
    assert proof.proof == "warm"
    assert any("/t held 3 files (300 bytes)" in r and "warm disk tier" in r for r in proof.reasons)


def test_a_probe_that_saw_cached_tokens_or_moved_the_counters_is_not_cold() -> None:
    assert judge(ZERO, None, [], ColdProbe(cached_tokens=16)).proof == "warm"
    moved = judge(ZERO, None, [], ColdProbe(cached_tokens=None, hit_tokens_delta=32.0))
    assert moved.proof == "warm" and any("rose by 32" in r for r in moved.reasons)


def test_nothing_checkable_is_unknown_not_cold() -> None:
    proof = judge({}, "metrics /metrics: HTTP 500", [], ColdProbe(error="HTTP 404"))
    assert (proof.proof, proof.cold) == ("not-proven", None)
    assert proof.checked == []
    assert len(proof.reasons) == 2


CLEAN_PROBE = ColdProbe(prompt_tokens=96, cached_tokens=0, hit_tokens_delta=None)


def test_a_clean_probe_without_hit_counters_proves_nothing() -> None:
    """A nonce prompt sees 0 cached tokens on a warm server too: without the counters the start is not proven."""
    unread = judge({}, "metrics /metrics: HTTP 500", [], CLEAN_PROBE)
    absent = judge(dict.fromkeys(ZERO), None, [DiskTierState(root_dir="/x")], CLEAN_PROBE)
    for proof in (unread, absent):
        assert (proof.proof, proof.cold) == ("not-proven", None), proof
        assert "probe" in proof.checked and "counters" not in proof.checked


def test_an_unreadable_disk_tier_leaves_the_start_not_proven() -> None:
    proof = judge(ZERO, None, [DiskTierState(root_dir="/x", error="PermissionError")], CLEAN_PROBE)
    assert proof.proof == "not-proven"


def test_the_terminal_line_leads_with_the_status_and_names_the_actions() -> None:
    proof = judge({}, "metrics /metrics: HTTP 500", [], CLEAN_PROBE)
    proof.actions = ["fresh-process", "emptied-disk-tier"]
    line = terminal_line(proof)
    assert line.startswith("cold start NOT PROVEN") and "fresh-process, emptied-disk-tier" in line
    assert "proven (" not in line
    assert terminal_line(judge(ZERO, None, [], CLEAN_PROBE)).startswith("cold start proven (counters, probe")


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
