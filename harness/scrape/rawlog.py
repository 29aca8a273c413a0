"""Raw scrapes on disk: ``scrapes.jsonl.gz``, one gzip member per record, flushed as it is written.

Each record is one JSON line compressed as its own gzip member, so a crash loses at most the record being written and
the file stays readable by ``gzip``/``zcat`` and by :func:`read_raw_scrapes`, which stops cleanly at a truncated tail
and skips a member damaged by a failed write (resuming at the next one).
"""

from __future__ import annotations

import gzip
import json
import os
import threading
import zlib
from pathlib import Path
from typing import IO, Any

_GZIP_WBITS = 31


class RawScrapeWriter:
    """Appends records durably; safe to call from several threads; writes after :meth:`close` are dropped."""

    def __init__(self, path: Path, *, compresslevel: int = 6) -> None:
        self.path = path
        self._level = compresslevel
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[bytes] | None = open(path, "ab")  # noqa: SIM115  (closed in close())
        self.records = 0

    def write(self, record: dict[str, Any]) -> bool:
        """Append one record (returns False once closed)."""
        line = (json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")
        member = gzip.compress(line, compresslevel=self._level, mtime=0)
        with self._lock:
            if self._file is None:
                return False
            self._file.write(member)
            self._file.flush()
            self.records += 1
            return True

    def close(self) -> None:
        """Flush to disk and close (idempotent)."""
        with self._lock:
            if self._file is None:
                return
            try:
                self._file.flush()
                os.fsync(self._file.fileno())
            finally:
                self._file.close()
                self._file = None


_MAGIC = b"\x1f\x8b\x08"


def _members(data: bytes) -> tuple[bytes, list[str]]:
    """Decompress concatenated gzip members; skip a damaged one (a failed write) and resume at the next member."""
    out = bytearray()
    notes: list[str] = []
    pos = 0
    while pos < len(data):
        if data[pos:pos + 3] != _MAGIC:
            nxt = data.find(_MAGIC, pos + 1)
            notes.append(f"skipped {(nxt if nxt != -1 else len(data)) - pos} unreadable bytes at offset {pos}")
            if nxt == -1:
                break
            pos = nxt
        dec = zlib.decompressobj(wbits=_GZIP_WBITS)
        try:
            chunk = dec.decompress(data[pos:])
        except zlib.error as exc:
            nxt = data.find(_MAGIC, pos + 1)
            notes.append(f"damaged gzip member at offset {pos} ({exc})")
            if nxt == -1:
                break
            pos = nxt
            continue
        if not dec.eof:  # cut short: keep its complete lines, then resume at the next member if there is one
            out += chunk[:chunk.rfind(b"\n") + 1]
            nxt = data.find(_MAGIC, pos + 1)
            if nxt == -1:
                notes.append("truncated tail (the writer stopped mid-record)")
                break
            notes.append(f"incomplete gzip member at offset {pos}")
            pos = nxt
            continue
        out += chunk
        pos = len(data) - len(dec.unused_data)
    return bytes(out), notes


def read_raw_scrapes(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """All readable records of a scrapes file, and notes on anything skipped (truncated tail, bad lines)."""
    notes: list[str] = []
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise OSError(f"cannot read scrapes file {path}: {exc.strerror or exc}") from None
    text_bytes, problems = _members(data)
    notes += [f"{path.name}: {problem}" for problem in problems]
    records: list[dict[str, Any]] = []
    bad = 0
    for line in text_bytes.decode("utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(record, dict) and isinstance(record.get("mono_ns"), int):
            records.append(record)
        else:
            bad += 1
    if bad:
        notes.append(f"{path.name}: skipped {bad} unreadable record(s)")
    return records, notes
