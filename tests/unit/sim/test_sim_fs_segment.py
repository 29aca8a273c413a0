"""The fs tier's segment file (harness/sim/cache/fs.py): real loss on deletion, seen by the next lookup; a warm
restart from the same directory; foreign files left alone; LRU eviction under the cap; a record cut short by a crash
ignored at the scan; lookups that open no file; batched stores equal to single ones."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from harness.sim.cache import fs as sim_fs
from harness.sim.cache.fs import COMPACT_MIN_DEAD, COMPACT_NAME, RECORD_BYTES, SEGMENT_NAME, FsTier

CHUNK_TOKENS, CHUNK_BYTES = 256, 1 << 20


def _tier(root: Path, cap: int | None = None, namespace: int = 7, chunk_bytes: int = CHUNK_BYTES) -> FsTier:
    return FsTier(root, namespace, CHUNK_TOKENS, chunk_bytes, None if cap is None else cap * chunk_bytes)


def _segment(tier: FsTier) -> Path:
    return tier.dir / SEGMENT_NAME


def test_no_file_before_the_first_store_then_one_segment(tmp_path: Path) -> None:
    tier = _tier(tmp_path)
    assert tier.dir.is_dir() and os.listdir(tier.dir) == []  # a cold tier holds no file (the cold-start check)
    assert tier.write_many([1, 2, 3]) == (3, [])
    assert os.listdir(tier.dir) == [SEGMENT_NAME]
    data = _segment(tier).read_bytes()
    header = sim_fs.segment_header(CHUNK_TOKENS, CHUNK_BYTES)
    assert data.startswith(sim_fs.SEGMENT_MARKER) and len(data) == len(header) + 3 * RECORD_BYTES


@pytest.mark.parametrize("how", ["rm -rf root", "unlink segment", "truncate segment", "replace segment"])
def test_loss_is_seen_by_the_next_lookup_and_the_tier_keeps_working(tmp_path: Path, how: str) -> None:
    root = tmp_path / "kv"
    tier = _tier(root)
    tier.write_many([1, 2, 3])
    assert tier.contains(2)
    if how == "rm -rf root":
        shutil.rmtree(root)
    elif how == "unlink segment":
        _segment(tier).unlink()
    elif how == "truncate segment":
        _segment(tier).write_bytes(b"")  # emptied in place: the same inode, shorter
    else:
        fresh = _tier(tmp_path / "other")
        fresh.write_many([9])
        os.replace(_segment(fresh), _segment(tier))  # another segment moved over it: chunk 9 only
    assert not tier.contains(1), "the first lookup after the loss misses"
    assert len(tier) == (1 if how == "replace segment" else 0)
    assert tier.write(4) == (True, [])  # the next store recreates what the loss removed
    assert tier.contains(4) and not tier.contains(2)
    assert _tier(root).index.keys() == tier.index.keys(), "what a restart reads is what the tier holds"


def test_a_restart_from_the_same_directory_is_warm_oldest_first(tmp_path: Path) -> None:
    first = _tier(tmp_path, cap=4)
    first.write_many([30, 10, 20])
    assert first.contains(30)  # a hit moves 30 to the end of the index, not its place in the segment
    first.write_many([40, 50])  # the cap (4) evicts the least recently used: 10
    assert list(first.index) == [20, 30, 40, 50]
    again = _tier(tmp_path, cap=4)
    assert list(again.index) == [30, 20, 40, 50], "write order, the eviction recorded"
    assert again.contains(20) and not again.contains(10)
    other = _tier(tmp_path, cap=4, namespace=8)
    assert len(other) == 0, "another namespace has its own segment"
    assert len(_tier(tmp_path, chunk_bytes=2 * CHUNK_BYTES)) == 0, "a segment for other chunks starts empty"


def test_lookups_open_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tier = _tier(tmp_path)
    tier.write_many(list(range(100)))

    def no_open(*_args: object, **_kwargs: object) -> int:
        raise AssertionError("a lookup opened a file")

    monkeypatch.setattr(os, "open", no_open)  # the module the tier calls
    assert all(tier.contains(k) for k in range(100)) and not tier.contains(100)
    assert tier.write_many(list(range(100, 150))) == (50, []), "nor does a store to the open segment"


def test_eviction_under_the_cap_and_compaction_keep_the_file_small(tmp_path: Path) -> None:
    cap = 8
    tier = _tier(tmp_path, cap=cap)
    for key in range(3 * COMPACT_MIN_DEAD):
        stored, evicted = tier.write(key)
        assert stored and evicted == ([key - cap] if key >= cap else [])
    assert list(tier.index) == list(range(3 * COMPACT_MIN_DEAD - cap, 3 * COMPACT_MIN_DEAD))
    assert tier.evictions == 3 * COMPACT_MIN_DEAD - cap and tier.compactions >= 2
    header = len(sim_fs.segment_header(CHUNK_TOKENS, CHUNK_BYTES))
    assert _segment(tier).stat().st_size <= header + RECORD_BYTES * (cap + 2 * COMPACT_MIN_DEAD + 2)
    assert os.listdir(tier.dir) == [SEGMENT_NAME], "the compaction's new segment was renamed over the old one"
    assert list(_tier(tmp_path, cap=cap).index) == list(tier.index)
    assert _tier(tmp_path, cap=0).write(1) == (False, []), "a cap of 0 stores nothing"


def test_a_record_cut_short_by_a_crash_is_ignored_at_the_scan(tmp_path: Path) -> None:
    tier = _tier(tmp_path)
    tier.write_many([1, 2, 3])
    tier.close()
    segment = _segment(tier)
    whole = segment.read_bytes()
    with segment.open("ab") as fh:
        fh.write(b"+00000000000000")  # the crash came in the middle of the fourth record
    again = _tier(tmp_path)
    assert list(again.index) == [1, 2, 3] and again.cut_bytes == 15
    assert segment.read_bytes() == whole, "cut off, so later records stay aligned"
    again.write(4)
    assert list(_tier(tmp_path).index) == [1, 2, 3, 4]
    with segment.open("ab") as fh:
        fh.write(b"garbage that is no record at all\n")
    assert list(_tier(tmp_path).index) == [1, 2, 3, 4]


def test_a_segment_whose_marker_was_cut_short_starts_empty(tmp_path: Path) -> None:
    tier = _tier(tmp_path)
    tier.write(1)
    tier.close()
    _segment(tier).write_bytes(sim_fs.SEGMENT_MARKER[:7])  # the crash came while the segment was created
    again = _tier(tmp_path)
    assert len(again) == 0 and again.write(5) == (True, [])
    assert list(_tier(tmp_path).index) == [5]


def test_a_foreign_file_at_the_segments_name_is_never_touched(tmp_path: Path) -> None:
    ns = tmp_path / sim_fs.SUBDIR / f"ns-{7:016x}"
    ns.mkdir(parents=True)
    foreign = ns / SEGMENT_NAME
    foreign.write_bytes(b"someone else's data\n")
    beside = ns / COMPACT_NAME
    beside.write_bytes(b"also theirs\n")
    tier = _tier(tmp_path, cap=2)
    assert len(tier) == 0
    assert tier.write_many([1, 2, 3]) == (0, []) and tier.write_failures == 3 and not tier.contains(1)
    assert tier.delete_own_files() == 0
    assert foreign.read_bytes() == b"someone else's data\n" and beside.read_bytes() == b"also theirs\n"
    foreign.unlink()  # gone: the tier works again (a foreign compaction file only stops compactions)
    assert tier.write_many([1, 2]) == (2, []) and tier.contains(1)
    assert beside.read_bytes() == b"also theirs\n"


def test_a_compaction_cut_short_by_a_crash_is_removed_at_start_up(tmp_path: Path) -> None:
    tier = _tier(tmp_path)
    tier.write_many([1, 2])
    tier.close()
    (tier.dir / COMPACT_NAME).write_bytes(_segment(tier).read_bytes()[:30])  # ours: the marker, then cut short
    again = _tier(tmp_path)
    assert os.listdir(again.dir) == [SEGMENT_NAME] and list(again.index) == [1, 2]


def test_cache_loss_deletes_the_segments_and_earlier_chunk_files_only(tmp_path: Path) -> None:
    tier = _tier(tmp_path)
    tier.write_many([1, 2])
    _tier(tmp_path, namespace=8).write(3)
    legacy = tier.dir / f"{5:016x}.kvsim"
    legacy.write_bytes(sim_fs.MARKER + b"0000000000000005 256 1048576\n")  # a chunk file of an earlier version
    named_like = tier.dir / f"{6:016x}.kvsim"
    named_like.write_bytes(b"not ours")
    assert tier.delete_own_files() == 3  # two segments and the old chunk file
    assert sorted(os.listdir(tier.dir)) == [named_like.name] and len(tier) == 0 and not tier.contains(1)


def test_another_process_storing_into_the_same_segment_is_seen(tmp_path: Path) -> None:
    mine, theirs = _tier(tmp_path), _tier(tmp_path)
    mine.write(1)
    theirs.write(2)  # the segment grew behind mine's back
    assert mine.contains(1) and 2 in mine.index, "read again: the size is not the one mine left"
    assert list(_tier(tmp_path).index) == [1, 2]


def test_a_batch_stores_as_single_writes_do(tmp_path: Path) -> None:
    rng = random.Random(5)
    single, batched = _tier(tmp_path / "a", cap=16), _tier(tmp_path / "b", cap=16)
    for _ in range(200):
        keys = [rng.randrange(40) for _ in range(rng.randrange(1, 30))]
        one = [single.write(k) for k in keys]
        stored, evicted = batched.write_many(keys)
        assert stored == sum(ok for ok, _ in one) and evicted == [v for _, ev in one for v in ev]
        assert list(single.index) == list(batched.index)
        if rng.random() < 0.3:
            probe = rng.randrange(40)
            assert single.contains(probe) == batched.contains(probe)
    assert _segment(single).read_bytes() == _segment(batched).read_bytes()


def test_a_failed_store_is_counted_and_not_indexed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tier = _tier(tmp_path)
    tier.write(1)
    size = _segment(tier).stat().st_size

    def full(fd: int, data: bytes) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    assert tier.write_many([2, 3]) == (0, []) and tier.write_failures == 2
    assert list(tier.index) == [1] and _segment(tier).stat().st_size == size
    monkeypatch.undo()
    assert tier.write(2) == (True, []) and list(_tier(tmp_path).index) == [1, 2]


def test_a_closed_tier_reads_its_segment_again_and_keeps_storing(tmp_path: Path) -> None:
    tier = _tier(tmp_path)
    tier.write_many([1, 2])
    tier.close()
    assert tier.contains(1) and tier.write(3) == (True, [])
    assert list(_tier(tmp_path).index) == [1, 2, 3]
