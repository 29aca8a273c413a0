"""Append-only JSONL journals in the run directory (``steps.jsonl``, ``arms.jsonl``), durable line by line."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from harness.core.jsonl import read_objects


def append(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON object as a line and fsync, so a crash right after keeps it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(record, sort_keys=True, default=str) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except OSError as exc:
            # Disk full mid-line: cut the torn line off so the journal stays whole and a later append (after a
            # resume) does not glue onto it.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
    finally:
        os.close(fd)


def read(path: Path) -> list[dict[str, Any]]:
    """All complete lines; a torn last line (crash mid-write) is ignored."""
    return read_objects(path)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON via a temporary file and rename, so readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=True, default=str)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # the old file (if any) is untouched; no half-written copy beside it
        raise
