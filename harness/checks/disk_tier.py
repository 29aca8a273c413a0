"""Disk-tier directory rules, shared by the checks and by the run itself (enforced at run time too).

A disk-tier ``root_dir`` must be absolute, not ``/``, not a home directory or a system directory, and either absent
(the harness creates it and writes a marker file), empty, or already marked as the harness's. The harness only ever
deletes inside directories that carry its marker, and only entries it did not find there when it claimed them.
"""

from __future__ import annotations

import json
import os
import pwd
from pathlib import Path

from harness.launch.base import DISK_TIER_MARKER

_SYSTEM_DIRS = {"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/opt", "/proc", "/root", "/run",
                "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var", "/mnt", "/media", "/var/tmp", "/var/lib"}


class DiskTierError(ValueError):
    """A disk-tier directory the harness must not use."""


def _home_dirs() -> set[str]:
    homes = {os.path.expanduser("~")}
    try:
        homes.update(p.pw_dir for p in pwd.getpwall())
    except OSError:
        pass
    return {str(Path(h).resolve()) for h in homes if h}


def validate_root_dir(root_dir: str) -> Path:
    """Path rules that need no file-system state. Raises :class:`DiskTierError`."""
    if not root_dir.startswith("/"):
        raise DiskTierError(f"root_dir {root_dir!r} must be an absolute path (e.g. /mnt/nvme/kv-tier)")
    path = Path(os.path.normpath(root_dir))
    text = str(path)
    if text in _SYSTEM_DIRS:
        raise DiskTierError(f"root_dir {root_dir!r} is a system directory; use a dedicated directory such as "
                            f"{text.rstrip('/')}/kv-tier")
    if text in _home_dirs():
        raise DiskTierError(f"root_dir {root_dir!r} is a home directory; use a dedicated subdirectory")
    return path


def ownership(path: Path) -> str:
    """``absent``, ``empty``, ``ours`` (marker present) or ``foreign`` (has files the harness did not create)."""
    if not path.exists():
        return "absent"
    if not path.is_dir():
        return "foreign"
    if (path / DISK_TIER_MARKER).is_file():
        return "ours"
    try:
        next(path.iterdir())
    except StopIteration:
        return "empty"
    return "foreign"


def claim(path: Path, run_id: str) -> None:
    """Create (if absent) and mark the directory as the harness's. Refuses a foreign directory."""
    validate_root_dir(str(path))
    state = ownership(path)
    if state == "foreign":
        raise DiskTierError(f"{path} holds files the harness did not create; give an empty or new directory")
    path.mkdir(parents=True, exist_ok=True)
    marker = path / DISK_TIER_MARKER
    if not marker.exists():
        marker.write_text(json.dumps({"owner": "kvoffload-harness", "claimed_by_run": run_id}) + "\n",
                          encoding="utf-8")


def clear_contents(path: Path) -> int:
    """Delete the tier's contents (cache-loss drill) in a directory the harness owns; returns entries removed."""
    if ownership(path) != "ours":
        raise DiskTierError(f"refusing to delete in {path}: it is not marked as created by the harness")
    removed = 0
    for entry in sorted(path.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if entry.name == DISK_TIER_MARKER and entry.parent == path:
            continue
        if entry.is_dir() and not entry.is_symlink():
            entry.rmdir()
        else:
            entry.unlink()
        removed += 1
    return removed
