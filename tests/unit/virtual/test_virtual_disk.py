"""The memory disk tier behaves as the simulator's file tier: same writes, hits, evictions, restart and cache loss, and
the same files and bytes (one segment per namespace, its records and compactions) as a walk of the real tier."""

from __future__ import annotations

import os
from pathlib import Path

from harness.sim.cache.fs import COMPACT_MIN_DEAD, SEGMENT_NAME, FsTier
from harness.virtual.disk import MemoryFsTier, VirtualDisk

CHUNK_TOKENS, CHUNK_BYTES = 256, 1 << 20


def _walk_entries(root: Path) -> int:
    return sum(len(files) + len(dirs) for _r, dirs, files in os.walk(root))


def _drive(tier: FsTier) -> list[object]:
    """The same operations on either tier; what each answered."""
    out: list[object] = []
    for key in (1, 2, 3, 4):
        out.append(tier.write(key))
    out += [tier.contains(k) for k in (1, 2, 3, 4, 9)]
    out.append(tier.write(5))  # the cap (4 chunks) evicts the least recently used
    out.append(list(tier.index))
    out.append(tier.evictions)
    return out


def _same_files(disk: VirtualDisk, mem_root: Path, real_root: Path) -> None:
    """What a walk of the real tier counts (its segment and the two directories above it) and its bytes are what the
    memory one counts."""
    assert disk.entries(str(mem_root)) == _walk_entries(real_root)
    segments = list(real_root.rglob(SEGMENT_NAME))
    assert disk.files(str(mem_root)) == (len(segments), sum(p.stat().st_size for p in segments))


def test_same_answers_as_the_file_tier(tmp_path: Path) -> None:
    real = FsTier(tmp_path / "real", 7, CHUNK_TOKENS, CHUNK_BYTES, max_bytes=4 * CHUNK_BYTES)
    disk = VirtualDisk()
    memory = MemoryFsTier(disk, str(tmp_path / "mem"), 7, CHUNK_TOKENS, CHUNK_BYTES, max_bytes=4 * CHUNK_BYTES)
    assert disk.files(str(tmp_path / "mem")) == (0, 0), "no segment before the first store (a cold tier holds none)"
    _same_files(disk, tmp_path / "mem", tmp_path / "real")
    assert _drive(memory) == _drive(real)
    assert len(memory) == len(real) == 4
    _same_files(disk, tmp_path / "mem", tmp_path / "real")
    for key in range(100, 100 + 2 * COMPACT_MIN_DEAD):  # evictions until the segment is compacted
        assert memory.write(key) == real.write(key)
    assert memory.compactions == real.compactions >= 1
    assert list(memory.index) == list(real.index)
    _same_files(disk, tmp_path / "mem", tmp_path / "real")


def test_a_restart_finds_the_files_oldest_first_and_a_cache_loss_removes_them() -> None:
    disk = VirtualDisk()
    first = MemoryFsTier(disk, "/tier", 3, CHUNK_TOKENS, CHUNK_BYTES)
    for key in (30, 10, 20):
        first.write(key)
    first.contains(30)  # a hit moves 30 to the end of the index, not its file's age
    again = MemoryFsTier(disk, "/tier", 3, CHUNK_TOKENS, CHUNK_BYTES)
    assert list(again.index) == [30, 10, 20]
    other = MemoryFsTier(disk, "/tier", 4, CHUNK_TOKENS, CHUNK_BYTES)  # another namespace: its own files
    assert len(other) == 0
    assert disk.clear("/tier") == 1 + 2 + 1  # harness-sim-kv, two namespace directories, one segment
    assert not again.contains(10) and 10 not in again.index  # lost: a miss, and out of the index
    assert again.write(10) == (True, []) and again.contains(10)  # written again after the loss
    assert disk.entries("/elsewhere") == 0 and disk.clear("/elsewhere") == 0
