"""Disk-tier ownership markers that cannot be forged by copying: the marker names what made it, and a ledger in this
user's state directory remembers every marker the harness wrote.

The marker (``.kvoffload-harness-owned`` in the directory) is JSON: format, run id, host, uid, the directory's real
path, a random nonce and the time. The ledger entry (``<user state dir>/disk-tiers/<nonce>.json``, see
:mod:`.state`) repeats them with the directory's device and inode. A directory is the harness's own only when its
marker is a small regular file, parses, and agrees with a ledger entry this user wrote, with this host, and with the
directory as it is now (same real path, same device and inode). So a marker copied into another directory, made on
another machine, made by hand (an empty file) or by an older harness (no nonce) is rejected with the reason; a
marker written by an earlier run on this host for the same directory stays valid, so directories are reused.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.host.labels import DISK_TIER_MARKER
from harness.host.owner import this_host
from harness.host.state import owned_file, user_dir

FORMAT = 2
MAX_MARKER_BYTES = 4096
MAX_LEDGER_SCAN = 10_000
_NONCE = re.compile(r"^[0-9a-f]{32}$")
_FIELDS = ("run_id", "host", "uid", "path", "nonce")


@dataclass(frozen=True)
class MarkerCheck:
    """Whether a directory's marker is one the harness wrote for it; ``reason`` says why not."""

    valid: bool
    reason: str = ""
    run_id: str = ""
    nonce: str = ""  # of a valid marker: keys its ledger entries (:mod:`.tier_ledger`)


def ledger_dir() -> Path:
    """Where the markers this user's harness wrote are remembered."""
    return user_dir() / "disk-tiers"


def write_marker(path: Path, run_id: str) -> None:
    """Mark ``path`` (an existing directory the harness just created or found empty) and record it in the ledger.

    The ledger entry is written first: a marker never exists without one."""
    real = os.path.realpath(path)
    info = os.stat(real)
    nonce = secrets.token_hex(16)
    record: dict[str, Any] = {"owner": "kvoffload-harness", "format": FORMAT, "run_id": run_id, "host": this_host(),
                              "uid": os.getuid(), "path": real, "nonce": nonce,
                              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    user_dir(create=True)
    ledger = ledger_dir()
    ledger.mkdir(mode=0o700, exist_ok=True)
    entry = {**record, "dev": info.st_dev, "ino": info.st_ino}
    _prune_ledger(ledger)
    _write_new(ledger / f"{nonce}.json", json.dumps(entry) + "\n")
    _write_new(Path(real) / DISK_TIER_MARKER, json.dumps(record) + "\n")


def _prune_ledger(ledger: Path) -> None:
    """Forget markers whose directory is gone (at most :data:`MAX_LEDGER_SCAN` entries looked at per write)."""
    with contextlib.suppress(OSError), os.scandir(ledger) as entries:
        for n, item in enumerate(entries):
            if n >= MAX_LEDGER_SCAN:
                break
            entry = _read_json(Path(item.path)) if item.name.endswith(".json") else None
            if entry is not None and not os.path.isdir(str(entry.get("path", ""))):
                with contextlib.suppress(OSError):
                    os.unlink(item.path)
                with contextlib.suppress(OSError):  # its engine sessions (harness.host.tier_ledger)
                    os.unlink(item.path[: -len(".json")] + ".sessions")


def _write_new(target: Path, text: str) -> None:
    """Write a file that must not exist yet (never through a link planted in its place)."""
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def _read_json(path: Path) -> dict[str, Any] | None:
    """A small JSON object from a regular file (links not followed), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            return None
        raw = fh.read(MAX_MARKER_BYTES + 1)
    if len(raw) > MAX_MARKER_BYTES:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def check_marker(path: Path) -> MarkerCheck:
    """Whether ``path`` carries a marker this user's harness wrote, on this host, for this very directory."""
    marker = _read_json(path / DISK_TIER_MARKER)
    if marker is None or marker.get("format") != FORMAT or not all(k in marker for k in _FIELDS):
        return MarkerCheck(False, f"its {DISK_TIER_MARKER} was not written by this version of the harness (empty, "
                                  "hand-made, unreadable or from an older version)")
    run = str(marker.get("run_id", ""))[:200]
    host = this_host()
    if marker["host"] != host:
        return MarkerCheck(False, f"its marker was made on another host ({str(marker['host'])[:100]!r}, this is "
                                  f"{host!r})", run)
    real = os.path.realpath(path)
    if marker["path"] != real:
        return MarkerCheck(False, f"its marker was made for another directory ({str(marker['path'])[:300]!r}): "
                                  "copied or moved here", run)
    nonce = str(marker["nonce"])
    entry_path = ledger_dir() / f"{nonce}.json" if _NONCE.match(nonce) else None
    entry = _read_json(entry_path) if entry_path is not None and owned_file(entry_path) else None
    if entry is None or any(entry.get(k) != marker[k] for k in _FIELDS):
        return MarkerCheck(False, "its marker is not in this user's ledger of markers the harness wrote "
                                  f"({ledger_dir()})", run)
    try:
        info = os.stat(real)
    except OSError as exc:
        return MarkerCheck(False, f"it cannot be examined: {exc.strerror or exc}", run)
    if (entry.get("dev"), entry.get("ino")) != (info.st_dev, info.st_ino):
        return MarkerCheck(False, "it is not the directory the marker was made in (it was removed and made again, "
                                  "or its marker copied from there)", run)
    return MarkerCheck(True, "", run, nonce)
