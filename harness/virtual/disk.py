"""The simulator's disk tier held in memory: the same segment, index and eviction as :mod:`harness.sim.cache.fs`,
without the file system.

On the real clock the simulator keeps one append-only segment file per namespace under the tier's ``root_dir``
(``harness-sim-kv/ns-<namespace>/chunks.kvseg``: a header, then a record per stored or evicted chunk); deleting it is
cache loss, and a restart reads it back (oldest first). :class:`VirtualDisk` keeps those segments as maps per
``root_dir`` (namespace -> :class:`Segment`) that live as long as the virtual run, so a restarted engine finds what
its predecessor wrote and a cache loss drill deletes it; :class:`MemoryFsTier` is
:class:`~harness.sim.cache.fs.FsTier` with its storage hooks over that map: a deleted segment is noticed by the next
lookup or store as the real tier notices a deleted file (the map it holds is no longer the directory's), records and
compactions are counted as in the file, so the files and bytes a walk of the real tier would count are the same. No
real I/O happens, so none can influence modelled time or the order of events.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from harness.sim.cache.fs import RECORD_BYTES, Event, FsTier


@dataclass
class Segment:
    """One namespace directory and its segment file: the live chunks (key -> write sequence) and the file's records
    (``None``: no file yet; the real tier creates it at the first store)."""

    chunks: dict[int, int] = field(default_factory=dict)
    records: int | None = None
    header_bytes: int = 0

    @property
    def size(self) -> int:
        """The file's bytes (0 when there is none)."""
        return 0 if self.records is None else self.header_bytes + RECORD_BYTES * self.records


class VirtualDisk:
    """The disk tiers' segments of one virtual run, per ``root_dir``."""

    def __init__(self) -> None:
        self._roots: dict[str, dict[int, Segment]] = {}
        self._seq = 0

    def directory(self, root_dir: str, namespace: int) -> Segment:
        """The namespace's directory (created, without a segment file, as the simulator's ``mkdir``)."""
        return self._roots.setdefault(_key(root_dir), {}).setdefault(namespace, Segment())

    def find(self, root_dir: str, namespace: int) -> Segment | None:
        """The namespace's directory if it exists (nothing is created)."""
        spaces = self._roots.get(_key(root_dir))
        return spaces.get(namespace) if spaces is not None else None

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
        return 1 + len(spaces) + sum(seg.records is not None for seg in spaces.values())

    def files(self, root_dir: str) -> tuple[int, int]:
        """(segment files, their bytes) under the directory: records hold a chunk's key, not its modelled KV bytes."""
        spaces = self._roots.get(_key(root_dir), {}).values()
        return sum(seg.records is not None for seg in spaces), sum(seg.size for seg in spaces)

    def clear(self, root_dir: str) -> int:
        """Delete everything under the directory (a fresh arm, a cache-loss drill); returns the entries removed."""
        removed = self.entries(root_dir)
        self._roots.pop(_key(root_dir), None)
        return removed


@functools.lru_cache(maxsize=256)
def _key(root_dir: str) -> str:
    """The directory as one map key (``~`` expanded); memoised: a tier asks for its segment on every lookup."""
    return str(Path(root_dir).expanduser())


class MemoryFsTier(FsTier):
    """:class:`~harness.sim.cache.fs.FsTier` whose segment lives in a :class:`VirtualDisk`."""

    def __init__(self, disk: VirtualDisk, root_dir: str, namespace: int, chunk_tokens: int, chunk_bytes: int,
                 max_bytes: int | None = None) -> None:  # no super().__init__: it would create directories
        self._setup(root_dir, namespace, chunk_tokens, chunk_bytes, max_bytes)
        self._disk = disk
        self._root_key = str(root_dir)
        self._namespace = namespace
        self._segment: Segment | None = disk.directory(self._root_key, namespace)
        self._load()

    def close(self) -> None:
        """Nothing is open."""

    def _fresh(self) -> None:
        if self._disk.find(self._root_key, self._namespace) is not self._segment:
            self._load()

    def _load(self) -> None:
        seg = self._segment = self._disk.find(self._root_key, self._namespace)
        if seg is None or seg.records is None:
            self._set_contents((), 0)
            return
        self._set_contents(sorted(seg.chunks, key=seg.chunks.__getitem__), seg.records)

    def _append(self, events: list[Event]) -> bool:
        seg = self._segment
        if seg is None:  # a cache loss removed the directory: the store creates it again
            seg = self._segment = self._disk.directory(self._root_key, self._namespace)
        if seg.records is None:
            seg.records, seg.header_bytes = 0, len(self._header)
        chunks = seg.chunks
        for stored, key in events:
            if stored:
                chunks[key] = self._disk.stamp()
            else:
                chunks.pop(key, None)
        seg.records += len(events)
        return True

    def _compact(self) -> bool:
        if self._segment is not None:
            self._segment.records = len(self._segment.chunks)
        return True

    def delete_own_files(self) -> int:
        """Delete every segment under the root (all namespaces); returns how many."""
        count, _size = self._disk.files(self._root_key)
        self._disk.clear(self._root_key)
        self._load()
        return count
