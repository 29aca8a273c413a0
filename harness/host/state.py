"""The harness's state directory, scoped per user and per run.

Layout: ``<root>/<uid>/runs/<run id>/servers/<pid>.json`` (servers a run started, see :mod:`.pidfiles`) and
``<root>/<uid>/disk-tiers/`` (the ledger of disk-tier markers, see :mod:`.ownership`). ``<root>`` is
``$HARNESS_STATE_DIR`` or ``~/.cache/kvoffload-harness``. The per-user directory is created ``0700`` and is used
only when it belongs to this user and is not a link, so one user's cleanup never sees (or forges) another's state.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


class StateDirError(OSError):
    """The per-user state directory exists but is not this user's own plain directory."""


def state_root() -> Path:
    """``$HARNESS_STATE_DIR`` or ``~/.cache/kvoffload-harness``."""
    return Path(os.environ.get("HARNESS_STATE_DIR") or str(Path.home() / ".cache" / "kvoffload-harness"))


def user_dir(*, create: bool = False) -> Path:
    """This user's state directory; with ``create``, made ``0700`` if absent. Raises :class:`StateDirError` when
    it exists but is a link or belongs to someone else."""
    path = state_root() / str(os.getuid())
    if create:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return path
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise StateDirError(f"{path} is not a directory of this user; remove it or set HARNESS_STATE_DIR")
    return path


def safe_name(text: str) -> str:
    """A file name for ``text`` (a run id): kept as is when already safe, else cleaned and suffixed with a hash."""
    cleaned = _SAFE.sub("-", text).strip("-.")[:80]
    if cleaned == text and cleaned:
        return cleaned
    return f"{cleaned or 'run'}-{hashlib.sha256(text.encode('utf-8', 'replace')).hexdigest()[:8]}"


def runs_dir() -> Path:
    """Where each run's state lives (``<user dir>/runs``)."""
    return user_dir() / "runs"


def run_dir(run_id: str) -> Path:
    """One run's state directory (not created)."""
    return runs_dir() / safe_name(run_id)


def owned_file(path: Path) -> bool:
    """``path`` is a regular file (not a link) of this user: state files of anyone else are never trusted."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid()
