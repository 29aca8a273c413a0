"""The fs (disk) tier: one real file per KV chunk under ``root_dir``.

Files live in ``ROOT_DIR/harness-sim-kv/ns-<namespace hash>/<chunk hash>.kvsim``; each holds a short header
(``HARNESS-SIM-KV/1`` marker, the chunk hash, token count and modelled size), not the modelled KV bytes, so the
disk stays small while the model charges the full ``chunk_bytes`` to the disk's bandwidth. Because the files
are real:

- deleting them (``rm -rf ROOT_DIR``, ``POST /admin/cache-loss``) is real cache loss: a lookup opens the file
  and treats a missing or foreign file as a miss;
- a restart with the same ``root_dir`` starts warm: the directory is scanned at start-up (oldest first).

The simulator only ever deletes files it recognises as its own (name pattern and header marker), and never
directories. ``max_bytes`` (``--disk-tier-max-bytes``, in modelled bytes) caps the tier with LRU eviction;
real vLLM 0.32 has no cap of its own, so without the flag the tier grows until the disk is full.
"""

from __future__ import annotations

import contextlib
import os
from collections import OrderedDict
from pathlib import Path

MARKER = b"HARNESS-SIM-KV/1\n"
SUBDIR = "harness-sim-kv"
SUFFIX = ".kvsim"


class FsTier:
    """Disk tier of real small files, indexed in memory in LRU order."""

    def __init__(
        self,
        root_dir: str | os.PathLike[str],
        namespace: int,
        chunk_tokens: int,
        chunk_bytes: int,
        max_bytes: int | None = None,
    ) -> None:
        self.root_dir = Path(root_dir)
        self.dir = self.root_dir / SUBDIR / f"ns-{namespace:016x}"
        self.chunk_tokens = chunk_tokens
        self.chunk_bytes = chunk_bytes
        self.max_chunks = None if max_bytes is None else max(0, max_bytes // chunk_bytes)
        self.index: OrderedDict[int, None] = OrderedDict()
        self.evictions = 0
        self.write_failures = 0
        self.dir.mkdir(parents=True, exist_ok=True)
        self._scan()

    def _path(self, key: int) -> str:
        return os.path.join(self.dir, f"{key:016x}{SUFFIX}")

    def _header(self, key: int) -> bytes:
        return MARKER + f"{key:016x} {self.chunk_tokens} {self.chunk_bytes}\n".encode("ascii")

    def _scan(self) -> None:
        found: list[tuple[float, int]] = []
        try:
            entries = list(os.scandir(self.dir))
        except FileNotFoundError:
            return
        for entry in entries:
            name = entry.name
            if not name.endswith(SUFFIX) or len(name) != 16 + len(SUFFIX):
                continue
            try:
                key = int(name[:16], 16)
                found.append((entry.stat().st_mtime, key))
            except (ValueError, OSError):
                continue
        for _mtime, key in sorted(found):
            self.index[key] = None

    def __len__(self) -> int:
        return len(self.index)

    @property
    def used_bytes(self) -> int:
        """Modelled bytes held."""
        return len(self.index) * self.chunk_bytes

    def contains(self, key: int) -> bool:
        """Whether the chunk's file exists and is ours; refreshes its LRU position."""
        if key not in self.index:
            return False
        expected = self._header(key)
        try:
            with open(self._path(key), "rb") as fh:
                ok = fh.read(len(expected)) == expected
        except OSError:
            ok = False
        if ok:
            self.index.move_to_end(key)
        else:
            del self.index[key]
        return ok

    def write(self, key: int) -> tuple[bool, list[int]]:
        """Write a chunk's file; returns (written, keys evicted by the size cap)."""
        if key in self.index:
            self.index.move_to_end(key)
            return True, []
        if self.max_chunks is not None and self.max_chunks == 0:
            return False, []
        evicted: list[int] = []
        if self.max_chunks is not None:
            while len(self.index) >= self.max_chunks:
                victim, _none = self.index.popitem(last=False)
                self._unlink(victim)
                evicted.append(victim)
        self.evictions += len(evicted)
        data = self._header(key)
        for attempt in range(2):
            try:
                # os.open/os.write: half the CPU of open() per file; with write-through every stored chunk is one
                # file, and the simulator's own CPU time must stay small next to what it models
                fd = os.open(self._path(key), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
                break
            except FileNotFoundError:
                if attempt == 1:
                    self.write_failures += 1
                    return False, evicted
                try:
                    self.dir.mkdir(parents=True, exist_ok=True)
                except OSError:
                    self.write_failures += 1
                    return False, evicted
            except OSError:
                self.write_failures += 1
                return False, evicted
        self.index[key] = None
        return True, evicted

    def _unlink(self, key: int) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self._path(key))

    def delete_own_files(self) -> int:
        """Delete every block file of ours under the root (all namespaces); returns how many."""
        count = 0
        base = self.root_dir / SUBDIR
        if base.is_dir():
            for ns_dir in base.iterdir():
                if not ns_dir.is_dir() or not ns_dir.name.startswith("ns-"):
                    continue
                for entry in os.scandir(ns_dir):
                    if not entry.name.endswith(SUFFIX) or not entry.is_file(follow_symlinks=False):
                        continue
                    try:
                        with open(entry.path, "rb") as fh:
                            if fh.read(len(MARKER)) != MARKER:
                                continue
                        os.unlink(entry.path)
                        count += 1
                    except OSError:
                        continue
        self.index.clear()
        return count
