"""The one atomic file writer: every file the harness replaces in place (run-directory records, reports, request
parts, the tier ledger) is written through :func:`atomic_path`, so a reader sees the old file or the whole new
one, never half a file, and a crash or power loss after the rename keeps the new contents.

How: a temporary file made with ``mkstemp`` in the target's folder (``O_EXCL``: never follows a planted link), the
contents flushed and ``fsync``-ed, its mode set, ``os.replace`` onto the target, then the folder ``fsync``-ed so the
rename itself is durable. On any failure the temporary file is removed and the old target is untouched; an
``OSError`` names the target, not the temporary file.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (a no-op where directories cannot be opened, e.g. Windows)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on a directory: the rename is still atomic
    finally:
        os.close(fd)


def _named(exc: OSError, path: Path) -> OSError:
    return OSError(exc.errno, exc.strerror or str(exc), str(path))


@contextmanager
def atomic_path(path: Path, *, mode: int = 0o644) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` to write to; when the block ends without an error it becomes
    ``path`` (durably, with ``mode``); when it raises, the temporary file is removed and ``path`` is unchanged."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _named(exc, path) from exc
    os.close(fd)
    try:
        yield Path(tmp)
        _fsync_file(tmp)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise _named(exc, path) from exc
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_text_atomic(path: Path, text: str, *, mode: int = 0o644) -> Path:
    """Write ``text`` (UTF-8, ``\\n`` line ends; unencodable characters replaced) to ``path`` atomically."""
    if not isinstance(text, str):
        raise TypeError(f"write_text_atomic needs text, not {type(text).__name__}")
    with atomic_path(path, mode=mode) as tmp, tmp.open("w", encoding="utf-8", errors="replace", newline="\n") as fh:
        fh.write(text)
    return path


def write_json_atomic(path: Path, data: Any, *, mode: int = 0o644) -> Path:
    """Write ``data`` as indented, key-sorted JSON (non-JSON values as their ``str``) to ``path`` atomically,
    creating its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n", mode=mode)
