"""Issue 25, item 6: a marked disk-tier directory is the harness's to empty only for what the harness wrote.

- Files a user puts into a directory after the harness marked it make the directory foreign: ``plan`` exits 2 and
  names them by path (never "is ours"), a run's arm fails naming them, the cache-loss drill deletes nothing, and no
  file in the directory changes.
- What the simulator wrote (its exact layout) and what an engine the harness launched wrote while it ran (a
  recorded session, vLLM's fs tier) are still emptied; a session whose harness was killed vouches for nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from rel_support import Progress, file_sums, tiered_arm

from harness.host import disk_tier, tier_ledger
from harness.host.disk_tier import DiskTierError, claim, clear_contents, inspect, ownership
from harness.host.labels import DISK_TIER_MARKER
from harness.host.markers import check_marker
from harness.run import storage_pressure
from harness.run.options import RunOptions
from harness.run.orchestrator import run_rollout
from harness.sim.cache import fs as sim_fs

CLI_TIMEOUT_S = 60


pytestmark = pytest.mark.usefixtures("state_dir")  # this test's own state dir (marker ledger)


def _sim_wrote(tier: Path, chunks: int = 40) -> None:
    """What the simulator's fs tier writes (its own code, real files)."""
    fs = sim_fs.FsTier(tier, namespace=7, chunk_tokens=256, chunk_bytes=1 << 20)
    for key in range(chunks):
        assert fs.write(key)[0]


def _user_notes(tier: Path) -> Path:
    notes = tier / "my-notes"
    notes.mkdir()
    (notes / "important.txt").write_text("years of work\n")
    return notes / "important.txt"


def test_files_a_user_adds_to_a_marked_directory_make_it_foreign_and_nothing_is_deleted(tmp_path: Path) -> None:
    tier = tmp_path / "kv"
    claim(tier, "run-1")
    _sim_wrote(tier)
    assert ownership(tier) == "ours", "the simulator's own files are the harness's"
    _user_notes(tier)
    (tier / "harness-sim-kv" / "ns-0000000000000007" / "mine.txt").write_text("inside the engine's tree\n")
    before = file_sums(tier)
    state, why = inspect(tier)
    assert state == "foreign"
    assert "holds 3 entries the harness did not create" in why
    for shown in ("my-notes", "my-notes/important.txt", "harness-sim-kv/ns-0000000000000007/mine.txt"):
        assert shown in why
    with pytest.raises(DiskTierError, match=r"my-notes/important\.txt"):
        claim(tier, "run-2")  # a fresh arm claims, then empties
    with pytest.raises(DiskTierError, match=r"refusing to delete in .*my-notes/important\.txt.*nothing in it was"):
        clear_contents(tier)  # the fresh-arm clearing and the cache-loss drill
    assert file_sums(tier) == before, "no file changed"


def test_a_planted_sim_looking_file_is_foreign_and_a_partly_written_one_is_not(tmp_path: Path) -> None:
    tier = tmp_path / "kv"
    claim(tier, "run-1")
    _sim_wrote(tier, chunks=2)
    ns = tier / "harness-sim-kv" / "ns-0000000000000007"
    (ns / sim_fs.COMPACT_NAME).write_bytes(sim_fs.SEGMENT_MARKER[:5])  # a compaction is writing it this instant
    (ns / "00000000000000ff.kvsim").write_bytes(sim_fs.MARKER[:5])  # a chunk file of an earlier version, the same
    assert ownership(tier) == "ours"
    (ns / "00000000000000fe.kvsim").write_bytes(b"my own data, named like a chunk")
    other = tier / "harness-sim-kv" / "ns-0000000000000008"
    other.mkdir()
    (other / sim_fs.SEGMENT_NAME).write_bytes(b"my own data, named like a segment")
    state, why = inspect(tier)
    assert state == "foreign" and "holds 2 entries" in why
    assert "harness-sim-kv/ns-0000000000000007/00000000000000fe.kvsim" in why
    assert f"harness-sim-kv/ns-0000000000000008/{sim_fs.SEGMENT_NAME}" in why
    many = tier / "dump"
    many.mkdir()
    for i in range(12):
        (many / f"f{i:02d}").write_text("x")
    assert "holds 15 entries" in inspect(tier)[1] and ", and 10 more" in inspect(tier)[1]


def test_the_simulators_segment_is_ours_and_its_cache_loss_leaves_a_foreign_file_alone(tmp_path: Path) -> None:
    """The simulator's own tier (a segment per namespace) is the harness's; a user's file beside it is foreign to the
    ledger, and the simulator's cache loss (``POST /admin/cache-loss``) deletes its segment and not that file."""
    tier = tmp_path / "kv"
    claim(tier, "run-1")
    fs = sim_fs.FsTier(tier, namespace=7, chunk_tokens=256, chunk_bytes=1 << 20)
    assert fs.write_many(list(range(10))) == (10, [])
    assert sorted(os.listdir(fs.dir)) == [sim_fs.SEGMENT_NAME] and ownership(tier) == "ours"
    mine = fs.dir / "mine.txt"
    mine.write_text("inside the engine's tree\n")
    state, why = inspect(tier)
    assert state == "foreign" and "holds 1 entry" in why and "harness-sim-kv/ns-0000000000000007/mine.txt" in why
    assert fs.delete_own_files() == 1 and not fs.contains(3)
    assert mine.read_text() == "inside the engine's tree\n" and sorted(os.listdir(fs.dir)) == ["mine.txt"]


def test_a_segment_replaced_while_the_check_reads_it_is_skipped_not_foreign(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine compacts its segment while the cache-loss drill checks its tier: the compaction's new segment,
    listed and stat'ed, then renamed over the old one before its header is read, is gone, not foreign (a CI run
    refused to empty its own tier over the same race with a chunk file evicted, in the per-chunk layout)."""
    tier = tmp_path / "kv"
    claim(tier, "run-1")
    _sim_wrote(tier, chunks=4)
    ns = tier / "harness-sim-kv" / "ns-0000000000000007"
    victim = ns / sim_fs.COMPACT_NAME
    victim.write_bytes((ns / sim_fs.SEGMENT_NAME).read_bytes())
    real_open = os.open

    def compacting_open(path: str, flags: int, *args: int) -> int:
        if str(path) == str(victim) and victim.exists():
            victim.replace(ns / sim_fs.SEGMENT_NAME)  # the simulator's rename, between the check's lstat and its read
        return real_open(path, flags, *args)

    monkeypatch.setattr(tier_ledger.os, "open", compacting_open)
    contents = tier_ledger.check_contents(tier, check_marker(tier).nonce)
    assert contents.foreign == 0 and not victim.exists()
    assert contents.checked == 4, "both sub-directories, the segment and the compaction's file were looked at"
    monkeypatch.setattr(tier_ledger.os, "open", real_open)
    (ns / "mine.txt").write_text("still foreign\n")
    assert inspect(tier)[0] == "foreign"


def test_the_layout_constants_are_the_simulators_and_the_drills() -> None:
    assert tier_ledger.SIM_SUBDIR == sim_fs.SUBDIR and tier_ledger.SIM_HEADER == sim_fs.MARKER
    assert tier_ledger.SIM_SEGMENT_HEADER == sim_fs.SEGMENT_MARKER
    assert tier_ledger.SIM_SEGMENT_FILES == (sim_fs.SEGMENT_NAME, sim_fs.COMPACT_NAME)
    assert tier_ledger.FILLER_NAME == storage_pressure.FILLER_NAME


def _engine_writes(tier: Path) -> None:
    """Files as an engine with its own layout (vLLM's fs tier) writes them."""
    for bucket in ("a1", "b2"):
        (tier / "model-x" / bucket).mkdir(parents=True, exist_ok=True)
        for i in range(3):
            (tier / "model-x" / bucket / f"{bucket}{i}.bin").write_bytes(os.urandom(64))


def test_what_an_engine_wrote_in_its_session_is_emptied_and_a_later_file_is_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tier_ledger, "SLACK_NS", 50_000_000)
    tier = tmp_path / "kv"
    claim(tier, "run-1")
    end = disk_tier.begin_session(tier, "vllm", "run-1")
    _engine_writes(tier)
    assert ownership(tier) == "ours", "a live session vouches for what its engine writes (the cache-loss drill)"
    end()
    assert ownership(tier) == "ours"
    time.sleep(0.3)
    late = _user_notes(tier)
    state, why = inspect(tier)
    assert state == "foreign" and "my-notes/important.txt" in why and "model-x" not in why
    late.unlink()
    late.parent.rmdir()
    assert clear_contents(tier) == 9 and sorted(os.listdir(tier)) == [DISK_TIER_MARKER]


def test_a_session_whose_harness_was_killed_vouches_for_nothing(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tier_ledger, "SLACK_NS", 50_000_000)
    tier = tmp_path / "kv"
    claim(tier, "run-1")
    nonce = check_marker(tier).nonce
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    start = time.time_ns()
    path = tier_ledger.ledger_dir() / f"{nonce}{tier_ledger.SUFFIX}"
    path.write_text(json.dumps({"sessions": [{"engine": "vllm", "run_id": "killed", "owner": f"{dead.pid}:1.000",
                                              "start_ns": start, "end_ns": None}]}))
    time.sleep(0.3)
    _engine_writes(tier)
    before = file_sums(tier)
    state, why = inspect(tier)
    assert state == "foreign" and "model-x" in why and "the engine of run killed wrote here" in why
    with pytest.raises(DiskTierError):
        clear_contents(tier)
    assert file_sums(tier) == before


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          timeout=CLI_TIMEOUT_S, check=False, env=dict(os.environ), stdin=subprocess.DEVNULL)


def test_plan_names_the_foreign_entries_and_never_says_ours(scenario: Callable[..., Path], tmp_path: Path) -> None:
    tier = tmp_path / "used-kv"
    claim(tier, "an-earlier-run")
    _sim_wrote(tier)
    _user_notes(tier)
    before = file_sums(tier)
    path = scenario("foreignplan", arms=("baseline",), extra_arms=[tiered_arm("tiered", tier)])
    plan = _cli("plan", str(path))
    out = " ".join((plan.stdout + plan.stderr).split())
    assert plan.returncode == 2, out
    assert "Traceback" not in out and "is ours" not in out
    assert f"arms[1].offload.secondary_tiers[0].root_dir: {tier}" in out
    assert "my-notes/important.txt" in out and "nothing in it is touched" in out
    assert file_sums(tier) == before


def test_a_run_fails_the_arm_and_the_cache_loss_drill_deletes_nothing(scenario: Callable[..., Path],
                                                                      tmp_path: Path) -> None:
    """Both directories are the harness's at the pre-flight checks; a user's file lands in one before its arm starts
    (the arm fails, naming it) and in the other during the cache-loss drill (the drill deletes nothing)."""
    fresh, drilled = tmp_path / "kv-fresh", tmp_path / "kv-drilled"
    claim(fresh, "an-earlier-run")
    _sim_wrote(fresh)
    path = scenario("foreignrun", arms=("baseline",),
                    extra_arms=[tiered_arm("fresh", fresh), tiered_arm("drilled", drilled)],
                    drills=[{"kind": "cache_loss", "arm": "drilled", "before_s": 1, "during_s": 1, "after_s": 0}],
                    steps={"levels": [{"concurrency": 2, "duration_s": 1}]})
    progress = Progress()
    planted: dict[str, Path] = {}

    def plant(target: Path) -> Callable[[], object]:
        def act() -> None:
            planted[str(target)] = _user_notes(target)
        return act

    progress.on(r"^\[baseline\] step 0 ", lambda _l, _p: plant(fresh)())
    progress.on(r"^\[drilled\] drill cache_loss: ", lambda _l, p: p.later(0.3, plant(drilled)))
    result = run_rollout(path, RunOptions(out_dir=tmp_path / "results", write_reports=False), say=progress)
    progress.join()
    assert result.summary is not None, result.message
    arms = {a.name: a for a in result.summary.arms}
    failure = arms["fresh"].failure
    assert failure is not None and "my-notes/important.txt" in failure.message, failure
    assert not any(line.startswith("[fresh] emptied disk tier") for line in progress.lines)
    assert any((fresh / "harness-sim-kv").rglob(sim_fs.SEGMENT_NAME)), "the earlier run's files are kept too"
    assert arms["drilled"].failure is None and arms["drilled"].steps
    drill = result.summary.drills[0]
    assert drill.status == "error" and "my-notes/important.txt" in drill.message, drill
    for target in (fresh, drilled):
        assert planted[str(target)].read_text() == "years of work\n"
    assert any((drilled / "harness-sim-kv").rglob(sim_fs.SEGMENT_NAME)), "nothing was deleted from the drilled tier"


class _FakeServer:
    """A started engine that writes into its tier like vLLM's fs tier until stopped."""

    def __init__(self, tier: Path) -> None:
        self.tier, self.running, self.killed = tier, True, False
        _engine_writes(tier)

    def alive(self) -> bool:
        return self.running

    def stop(self, timeout_s: float = 20.0) -> None:
        self.running = False

    def kill(self) -> None:
        self.killed = True


def test_a_launched_servers_stop_ends_its_session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The arm's server is wrapped (harness.run.arm_server): what the engine wrote until ``stop`` is the harness's,
    a file added after it is not."""
    from harness.run.arm_server import TierSessionServer

    monkeypatch.setattr(tier_ledger, "SLACK_NS", 50_000_000)
    tier = tmp_path / "kv"
    claim(tier, "run-1")
    end = disk_tier.begin_session(tier, "vllm", "run-1")
    inner = _FakeServer(tier)
    server = TierSessionServer(inner, end)  # type: ignore[arg-type]
    server.kill()
    assert inner.killed, "kill() reaches the engine"
    server.stop()
    assert not server.alive() and ownership(tier) == "ours"
    time.sleep(0.3)
    _user_notes(tier)
    assert "my-notes/important.txt" in inspect(tier)[1], "the session ended with the server's stop"
