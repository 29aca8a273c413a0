"""The fs (disk) tier: one append-only segment file per namespace under ``root_dir``, indexed in memory.

``ROOT_DIR/harness-sim-kv/ns-<namespace hash>/chunks.kvseg`` holds a header (the marker line
``HARNESS-SIM-KV/2 segment``, then ``<chunk tokens> <chunk bytes>``) and then one fixed-size record per event,
``+<16 hex chunk key>\\n`` (stored) or ``-<16 hex chunk key>\\n`` (evicted), 18 bytes each. No KV bytes are written: the
disk stays small while the model charges the full ``chunk_bytes`` to the disk's bandwidth. Because the file is real:

- deleting or emptying it (``rm -rf ROOT_DIR``, the cache-loss drill, ``POST /admin/cache-loss``) is real cache loss:
  every lookup and store first compares the segment on disk (one ``os.lstat``, no open) with the one this process
  holds (device, inode, size); when it is gone, replaced or not the size this process left it, the index is dropped
  and read again from what is there, so the first lookup after a deletion misses;
- a restart with the same ``root_dir`` starts warm: the segment is read at start-up, its chunks oldest first (write
  order); a record cut short at its end (a crash in the middle of a write) is ignored and cut off;
- the segment is created at the first store, not at start-up (a fresh arm's tier holds no file before it stores).

When dead records (evicted chunks) outnumber live ones, and are at least :data:`COMPACT_MIN_DEAD`, the segment is
rewritten with its live chunks in write order (``chunks.kvseg.new``, then renamed over it). A batch of stores (a
cascade) is one ``os.lstat`` and one ``os.write`` of its records, a lookup one ``os.lstat``. The file per chunk this
replaces cost ~33 us of CPU per stored chunk and ~5 us per lookup (now ~7 us and ~1.3 us one by one, less in a
batch), and more in wall time: creating the files held the engine loop, so the demo's tiered c32 step fell 14% behind
the wall clock (2% now; ``harness/sim/README.md``).

The simulator deletes or rewrites only files it recognises as its own (the exact name and header marker), never
directories; a foreign file at the segment's name is left alone and the tier then stores nothing (each store a
``write_failures``). The per-chunk files of earlier versions (``<16 hex>.kvsim`` starting ``HARNESS-SIM-KV/1``) are
the harness's too: :meth:`FsTier.delete_own_files` deletes them, and they are not read. ``max_bytes``
(``--disk-tier-max-bytes``, in modelled bytes) caps the tier with LRU eviction; real vLLM 0.32 has no cap of its own,
so without the flag the tier grows until the disk is full.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path

MARKER = b"HARNESS-SIM-KV/1\n"  # the per-chunk files of earlier versions
SEGMENT_MARKER = b"HARNESS-SIM-KV/2 segment\n"
SUBDIR = "harness-sim-kv"
SEGMENT_NAME = "chunks.kvseg"
COMPACT_NAME = SEGMENT_NAME + ".new"  # a compaction's new segment before it is renamed over the old one
RECORD_BYTES = 18
COMPACT_MIN_DEAD = 4096
_RECORD = re.compile(rb"([+-])([0-9a-f]{16})\n")
_LEGACY_FILE = re.compile(r"^[0-9a-f]{16}\.kvsim$")  # a per-chunk file of earlier versions
_OPEN_FLAGS = os.O_RDWR | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
Ident = tuple[int, int, int]  # (device, inode, size) of the file at the segment's path
Event = tuple[bool, int]  # (stored: True, evicted: False; the chunk's key): one record


def should_compact(live: int, records: int) -> bool:
    """Whether a segment of ``records`` records, ``live`` of them live chunks, is rewritten."""
    dead = records - live
    return dead >= COMPACT_MIN_DEAD and dead > live


def segment_header(chunk_tokens: int, chunk_bytes: int) -> bytes:
    """The segment's first bytes: the marker, then the chunk geometry its records are for."""
    return SEGMENT_MARKER + f"{chunk_tokens} {chunk_bytes}\n".encode("ascii")


def parse_records(body: bytes) -> tuple[list[tuple[bool, int]], int]:
    """The records at the start of ``body`` ((stored?, key) each) and how many bytes they take; parsing stops at the
    first record cut short or malformed."""
    out: list[tuple[bool, int]] = []
    pos, match = 0, _RECORD.match
    while (m := match(body, pos)) is not None:
        out.append((m.group(1) == b"+", int(m.group(2), 16)))
        pos += RECORD_BYTES
    return out, pos


def _ident(info: os.stat_result, size: int | None = None) -> Ident:
    return info.st_dev, info.st_ino, info.st_size if size is None else size


class FsTier:
    """Disk tier of one segment file, indexed in memory in LRU order.

    The index logic (LRU, cap, eviction, loss detection, compaction threshold) is here; the storage is five hooks
    (:meth:`_fresh`, :meth:`_load`, :meth:`_append`, :meth:`_compact`, :meth:`delete_own_files`) that
    :class:`harness.virtual.disk.MemoryFsTier` replaces with a map in memory."""

    def __init__(
        self,
        root_dir: str | os.PathLike[str],
        namespace: int,
        chunk_tokens: int,
        chunk_bytes: int,
        max_bytes: int | None = None,
    ) -> None:
        self._setup(root_dir, namespace, chunk_tokens, chunk_bytes, max_bytes)
        self.path = os.path.join(self.dir, SEGMENT_NAME)
        self._fd: int | None = None
        self._ident: Ident | None = None  # what is at the path as this process last saw it (None: nothing)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._drop_own(os.path.join(self.dir, COMPACT_NAME), SEGMENT_MARKER)  # a compaction cut short by a crash
        self._load()

    def _setup(self, root_dir: str | os.PathLike[str], namespace: int, chunk_tokens: int, chunk_bytes: int,
               max_bytes: int | None) -> None:
        """The attributes of either tier, without touching any storage."""
        self.root_dir = Path(root_dir)
        self.dir = self.root_dir / SUBDIR / f"ns-{namespace:016x}"
        self.chunk_tokens = chunk_tokens
        self.chunk_bytes = chunk_bytes
        self.max_chunks = None if max_bytes is None else max(0, max_bytes // chunk_bytes)
        self.index: OrderedDict[int, None] = OrderedDict()  # LRU order
        self._order: dict[int, None] = {}  # the same chunks in write order (the segment's)
        self._records = 0  # records in the segment, dead ones included
        self._header = segment_header(chunk_tokens, chunk_bytes)
        self.evictions = 0
        self.write_failures = 0
        self.compactions = 0
        self.cut_bytes = 0  # bytes of records cut short (a crash mid-write) cut off at a scan

    def _set_contents(self, keys: Iterable[int], records: int) -> None:
        """Index the chunks a scan found (write order, oldest first); the maps are changed in place."""
        self._order.clear()
        self._order.update(dict.fromkeys(keys))
        self.index.clear()
        self.index.update(dict.fromkeys(self._order))
        self._records = records

    def __len__(self) -> int:
        return len(self.index)

    def __del__(self) -> None:
        self.close()

    @property
    def used_bytes(self) -> int:
        """Modelled bytes held."""
        return len(self.index) * self.chunk_bytes

    # ---------------------------------------------------------------- the index

    def contains(self, key: int) -> bool:
        """Whether the chunk is stored (the segment checked first: a lost one is a miss); refreshes its LRU
        position."""
        index = self.index
        if key not in index:
            return False
        self._fresh()
        if key not in index:
            return False
        index.move_to_end(key)
        return True

    def write(self, key: int) -> tuple[bool, list[int]]:
        """Store a chunk; returns (stored, keys evicted by the size cap)."""
        stored, evicted = self.write_many((key,))
        return stored == 1, evicted

    def write_many(self, keys: Sequence[int]) -> tuple[int, list[int]]:
        """Store chunks as :meth:`write` does one by one, with one check of the segment and one write to it; returns
        (how many of ``keys`` are stored, keys evicted by the size cap). When the write fails none of the new ones is
        stored, and what they evicted stays evicted (unrecorded on disk: a restart before the next compaction finds
        it again)."""
        if not keys:
            return 0, []
        self._fresh()
        index, order, cap = self.index, self._order, self.max_chunks
        stored = 0
        added: list[int] = []
        evicted: list[int] = []
        events: list[Event] = []
        for key in keys:
            if key in index:
                index.move_to_end(key)
                stored += 1
                continue
            if cap == 0:
                continue
            if cap is not None:
                while len(index) >= cap:
                    victim, _none = index.popitem(last=False)
                    del order[victim]
                    evicted.append(victim)
                    events.append((False, victim))
            order[key] = None
            index[key] = None
            added.append(key)
            events.append((True, key))
        if added and not self._append(events):
            for key in added:
                if key in index:
                    del index[key]
                    del order[key]
            self.write_failures += len(added)
            never = set(added)  # evicted by a later key of this batch: never stored, so not evicted either
            evicted = [key for key in evicted if key not in never]
            self.evictions += len(evicted)
            return stored, evicted
        self.evictions += len(evicted)
        if not added:
            return stored, evicted
        self._records += len(events)
        if should_compact(len(order), self._records) and self._compact():
            self._records = len(order)
            self.compactions += 1
        return stored + len(added), evicted

    # ---------------------------------------------------------------- the segment file

    def close(self) -> None:
        """Close the segment (the next lookup or store reads it again)."""
        fd, self._fd, self._ident = getattr(self, "_fd", None), None, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _fresh(self) -> None:
        """Read the segment again when the one on disk is not the one this process holds (deleted, emptied,
        replaced, appended to by another process)."""
        try:
            info = os.lstat(self.path)
        except OSError:
            if self._ident is not None:
                self._load()
            return
        if _ident(info) != self._ident:
            self._load()

    def _load(self) -> None:
        """Index what the segment holds now (nothing when there is none). An empty segment or one whose marker is cut
        short (a crash while it was created), or one for other chunks, starts empty; a file that is not ours is left
        as it is (and stores fail while it is there)."""
        self.close()
        self._set_contents((), 0)
        self._ident = None
        try:
            fd = os.open(self.path, _OPEN_FLAGS)
        except FileNotFoundError:
            return
        except OSError:  # a link, a directory, unreadable: not ours to use
            with contextlib.suppress(OSError):
                self._ident = _ident(os.lstat(self.path))
            return
        try:
            info = os.fstat(fd)
            self._ident = _ident(info)
            data = _read_all(fd, info.st_size) if stat.S_ISREG(info.st_mode) else None
            if data is None or not SEGMENT_MARKER.startswith(data[:len(SEGMENT_MARKER)]):
                os.close(fd)
                return
            header = self._header
            if not data.startswith(header):
                os.ftruncate(fd, 0)
                os.write(fd, header)
                data = header
            found, used = parse_records(data[len(header):])
            end = len(header) + used
            if end < len(data):
                os.ftruncate(fd, end)
                self.cut_bytes += len(data) - end
        except OSError:  # left as it is, not used while it stays so
            with contextlib.suppress(OSError):
                os.close(fd)
            return
        order: dict[int, None] = {}
        for stored, key in found:
            order.pop(key, None)
            if stored:
                order[key] = None
        self._set_contents(order, len(found))
        self._fd = fd
        self._ident = _ident(info, end)

    def _append(self, events: list[Event]) -> bool:
        """Append the records of stores and evictions ((stored?, key), in order); False when they could not be
        written."""
        if self._fd is None and (self._ident is not None or not self._create()):
            return False  # a file not ours sits at the segment's path, or the segment cannot be created
        fd, ident = self._fd, self._ident
        assert fd is not None and ident is not None
        data = b"".join([(b"+%016x\n" if stored else b"-%016x\n") % key for stored, key in events])
        try:
            written = os.write(fd, data)
        except OSError:
            written = 0
        if written == len(data):
            self._ident = (ident[0], ident[1], ident[2] + written)
            return True
        if written:  # disk full in the middle: cut the partial record off again
            with contextlib.suppress(OSError):
                os.ftruncate(fd, ident[2])
        return False

    def _create(self) -> bool:
        """Create the segment (and its directories: a cache loss may have removed them); False when it cannot."""
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, _OPEN_FLAGS | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:  # another process created it meanwhile: use that one
            self._load()
            return self._fd is not None
        except OSError:
            return False
        try:
            if os.write(fd, self._header) != len(self._header):
                raise OSError("short write")
            self._ident = _ident(os.fstat(fd))
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            return False
        self._fd = fd
        return True

    def _compact(self) -> bool:
        """Rewrite the segment with its live chunks only; False (the old one kept) when it cannot."""
        new = os.path.join(self.dir, COMPACT_NAME)
        data = self._header + b"".join(b"+%016x\n" % key for key in self._order)
        self._drop_own(new, SEGMENT_MARKER)
        try:
            fd = os.open(new, _OPEN_FLAGS | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError:
            return False
        try:
            if os.write(fd, data) != len(data):
                raise OSError("short write")
            os.replace(new, self.path)
            info = os.fstat(fd)
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(new)
            return False
        self.close()
        self._fd = fd
        self._ident = _ident(info)
        return True

    @staticmethod
    def _drop_own(path: str, marker: bytes) -> bool:
        """Delete ``path`` if it is a regular file of ours (its first bytes ``marker``, or a prefix of it: a file
        being created this instant, the rule of ``harness/host/tier_ledger.py``); True if deleted."""
        if not _own_file(path, marker):
            return False
        with contextlib.suppress(OSError):
            os.unlink(path)
            return True
        return False

    def delete_own_files(self) -> int:
        """Delete every file of ours under the root (all namespaces: segments, a compaction's leftover, the
        per-chunk files of earlier versions); returns how many."""
        count = 0
        base = self.root_dir / SUBDIR
        if base.is_dir():
            for ns_dir in base.iterdir():
                if not ns_dir.is_dir() or not ns_dir.name.startswith("ns-"):
                    continue
                for entry in os.scandir(ns_dir):
                    name = entry.name
                    if name in (SEGMENT_NAME, COMPACT_NAME):
                        count += self._drop_own(entry.path, SEGMENT_MARKER)
                    elif _LEGACY_FILE.match(name):
                        count += self._drop_own(entry.path, MARKER)
        self._load()
        return count


def _own_file(path: str, marker: bytes) -> bool:
    """A regular file (links not followed) whose first bytes are ``marker`` or a prefix of it."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and marker.startswith(os.read(fd, len(marker)))
    except OSError:
        return False
    finally:
        os.close(fd)


def _read_all(fd: int, size: int) -> bytes:
    parts: list[bytes] = []
    offset = 0
    while offset < size:
        chunk = os.pread(fd, size - offset, offset)
        if not chunk:
            break
        parts.append(chunk)
        offset += len(chunk)
    return b"".join(parts)
