"""The simulator's disk tier held in memory: the same files, index and eviction as :mod:`harness.sim.cache.fs`,
without the file system.

On the real clock the simulator writes one small file per KV chunk under the tier's ``root_dir``
(``harness-sim-kv/ns-<namespace>/<chunk>.kvsim``); deleting them is cache loss, and a restart scans them back
(oldest first). :class:`VirtualDisk` keeps those files as a map per ``root_dir`` (namespace -> chunk key -> write
sequence) that lives as long as the virtual run, so a restarted engine finds what its predecessor wrote and a cache
loss drill deletes it; :class:`MemoryFsTier` is :class:`~harness.sim.cache.fs.FsTier` over that map. The one
difference is the order a restart scans files in: the real tier sorts them by modification time (its clock is
coarse, so ties fall back to the chunk key), the memory tier by exact write order. No real I/O happens, so none
can influence modelled time or the order of events.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from pathlib import Path

from harness.sim.cache.fs import SUBDIR, FsTier

Files = dict[int, tuple[int, int]]  # chunk key -> (write sequence: the file's "mtime", the file's bytes)


class VirtualDisk:
    """The disk tiers' files of one virtual run, per ``root_dir``."""

    def __init__(self) -> None:
        self._roots: dict[str, dict[int, Files]] = {}
        self._seq = 0

    def namespace(self, root_dir: str, namespace: int) -> Files:
        """The files of one namespace directory (created empty, as the simulator's ``mkdir``)."""
        return self._roots.setdefault(_key(root_dir), {}).setdefault(namespace, {})

    def stamp(self) -> int:
        """The next write sequence number."""
        self._seq += 1
        return self._seq

    def entries(self, root_dir: str) -> int:
        """What :func:`harness.host.disk_tier.clear_contents` would remove from the directory: files and
        directories, the harness's marker aside."""
        spaces = self._roots.get(_key(root_dir), {})
        if not spaces:
            return 0
        return 1 + len(spaces) + sum(len(files) for files in spaces.values())

    def files(self, root_dir: str) -> tuple[int, int]:
        """(chunk files, their bytes) under the directory: each file holds a short header, not the modelled KV bytes."""
        count = size = 0
        for files in self._roots.get(_key(root_dir), {}).values():
            count += len(files)
            size += sum(nbytes for _seq, nbytes in files.values())
        return count, size

    def clear(self, root_dir: str) -> int:
        """Delete everything under the directory (a fresh arm, a cache-loss drill); returns the entries removed."""
        removed = self.entries(root_dir)
        self._roots.pop(_key(root_dir), None)
        return removed


@functools.lru_cache(maxsize=256)
def _key(root_dir: str) -> str:
    """The directory as one map key (``~`` expanded); memoised: a tier asks for its files on every lookup."""
    return str(Path(root_dir).expanduser())


class MemoryFsTier(FsTier):
    """:class:`~harness.sim.cache.fs.FsTier` whose files live in a :class:`VirtualDisk`."""

    def __init__(self, disk: VirtualDisk, root_dir: str, namespace: int, chunk_tokens: int, chunk_bytes: int,
                 max_bytes: int | None = None) -> None:  # no super().__init__: it would create directories
        self.root_dir = Path(root_dir)
        self.dir = self.root_dir / SUBDIR / f"ns-{namespace:016x}"
        self.chunk_tokens = chunk_tokens
        self.chunk_bytes = chunk_bytes
        self.max_chunks = None if max_bytes is None else max(0, max_bytes // chunk_bytes)
        self.index: OrderedDict[int, None] = OrderedDict()
        self.evictions = 0
        self.write_failures = 0
        self._disk = disk
        self._root_key = str(root_dir)
        self._namespace = namespace
        self._files = disk.namespace(self._root_key, namespace)
        self._header_bytes = len(self._header(0)) - 16  # the header's length but for the key's hex digits
        self._scan()

    def _live(self) -> Files:
        """This namespace's files (recreated after a cache loss removed the directory, as the real tier's retry
        with ``mkdir`` does)."""
        return self._disk.namespace(self._root_key, self._namespace)

    def _scan(self) -> None:
        for key, _seq in sorted(self._files.items(), key=lambda item: item[1][0]):
            self.index[key] = None

    def contains(self, key: int) -> bool:
        """Whether the chunk's file exists; refreshes its LRU position (a lost file leaves the index)."""
        if key not in self.index:
            return False
        if key in self._live():
            self.index.move_to_end(key)
            return True
        del self.index[key]
        return False

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
        self._live()[key] = (self._disk.stamp(), self._header_bytes + len(f"{key:016x}"))
        self.index[key] = None
        return True, evicted

    def _unlink(self, key: int) -> None:
        self._live().pop(key, None)

    def delete_own_files(self) -> int:
        """Delete every chunk file under the root (all namespaces); returns how many."""
        count, _size = self._disk.files(self._root_key)
        self._disk.clear(self._root_key)
        self.index.clear()
        return count

