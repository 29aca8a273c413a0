"""The memory disk tier behaves as the simulator's file tier: same writes, hits, evictions, restart and cache loss."""

from __future__ import annotations

import os
from pathlib import Path

from harness.sim.cache.fs import FsTier
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


def test_same_answers_as_the_file_tier(tmp_path: Path) -> None:
    real = FsTier(tmp_path / "real", 7, CHUNK_TOKENS, CHUNK_BYTES, max_bytes=4 * CHUNK_BYTES)
    disk = VirtualDisk()
    memory = MemoryFsTier(disk, str(tmp_path / "mem"), 7, CHUNK_TOKENS, CHUNK_BYTES, max_bytes=4 * CHUNK_BYTES)
    assert _drive(memory) == _drive(real)
    assert disk.files(str(tmp_path / "mem"))[0] == len(real) == 4
    # what a walk of the real tier counts (its files and the two directories above them) is what the memory one counts
    assert disk.entries(str(tmp_path / "mem")) == _walk_entries(tmp_path / "real")
    size = sum(p.stat().st_size for p in (tmp_path / "real").rglob("*.kvsim"))
    assert disk.files(str(tmp_path / "mem"))[1] == size


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
    assert disk.clear("/tier") == 1 + 2 + 3  # harness-sim-kv, two namespace directories, three files
    assert not again.contains(10) and 10 not in again.index  # lost: a miss, and out of the index
    assert again.write(10) == (True, []) and again.contains(10)  # written again after the loss
    assert disk.entries("/elsewhere") == 0 and disk.clear("/elsewhere") == 0
