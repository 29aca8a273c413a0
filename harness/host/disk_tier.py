"""Disk-tier directory rules, shared by the checks and by the run itself (enforced at run time too).

A disk-tier ``root_dir`` must be absolute, not ``/``, not a home directory, not a system directory (or inside one
of the operating system's own trees such as ``/etc`` or ``/usr``), and either absent (the harness creates it and
writes a marker file), empty, or already marked as the harness's. The harness only ever deletes inside directories
that carry its marker, never the marker itself, and never follows a symbolic link out of the directory.

A marker counts only when :mod:`harness.host.markers` vouches for it (this user's harness wrote it, on this
host, for this very directory): a directory with a copied, hand-made or old-format marker is foreign, with the
reason, and nothing in it is touched. A valid marker vouches for the directory, not for what is in it: every entry
must be one the harness (the engine it launched for the tier) wrote, :mod:`harness.host.tier_ledger`; a marked
directory holding anything else is foreign too (the entries named by path), and nothing is emptied.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
from collections.abc import Callable
from pathlib import Path

from harness.host.labels import DISK_TIER_MARKER
from harness.host.markers import check_marker, write_marker
from harness.host.tier_ledger import check_contents, close_session, open_session

_SYSTEM_DIRS = {"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/opt", "/proc", "/root",
                "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/var", "/mnt", "/media", "/var/tmp", "/var/lib",
                "/var/cache", "/var/log", "/usr/local"}
# Trees that belong to the operating system: nothing below them may be a disk tier.
_SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/proc", "/sbin", "/sys", "/usr")


class DiskTierError(ValueError):
    """A disk-tier directory the harness must not use."""


def _home_dirs() -> set[str]:
    homes = {os.path.expanduser("~")}
    with contextlib.suppress(OSError):
        homes.update(p.pw_dir for p in pwd.getpwall())
    return {os.path.realpath(h) for h in homes if h and h.startswith("/")} | {h for h in homes if h}


def _normal(path: str) -> str:
    """``os.path.normpath`` but with POSIX's special leading ``//`` folded to one slash."""
    text = os.path.normpath(path)
    return "/" + text.lstrip("/")


def _forbidden(text: str, homes: set[str]) -> str | None:
    if text in _SYSTEM_DIRS:
        return "is a system directory"
    if any(text.startswith(tree + "/") for tree in _SYSTEM_TREES):
        return "is inside a system directory tree"
    if text in homes:
        return "is a home directory"
    return None


def validate_root_dir(root_dir: str) -> Path:
    """Path rules that need no file-system state (symbolic links are resolved). Raises :class:`DiskTierError`."""
    if not root_dir.startswith("/"):
        raise DiskTierError(f"root_dir {root_dir!r} must be an absolute path (e.g. /mnt/nvme/kv-tier)")
    text = _normal(root_dir)
    homes = _home_dirs()
    for candidate in dict.fromkeys((text, os.path.realpath(text))):
        why = _forbidden(candidate, homes)
        if why is not None:
            shown = root_dir if candidate == text else f"{root_dir} (-> {candidate})"
            example = "/mnt/nvme/kv-tier" if why != "is a home directory" else f"{candidate}/kv-tier"
            raise DiskTierError(f"root_dir {shown} {why}; use a dedicated directory for the tier such as {example}")
    return Path(text)


NO_MARKER_FILES = "holds files the harness did not create (or is not a plain directory)"
WHAT_TO_DO = ("give an empty or new directory; or, if everything in it may be deleted, empty it yourself (the "
              "marker included) and run again")


def _inspect(path: Path) -> tuple[str, str, bool]:
    """(state, why, whether the harness's own marker is there)."""
    try:
        if not path.exists() and not path.is_symlink():
            return "absent", "", False
        if path.is_symlink() or not path.is_dir():
            return "foreign", NO_MARKER_FILES, False
        marker = path / DISK_TIER_MARKER
        if marker.exists() or marker.is_symlink():
            check = check_marker(path)
            if not check.valid:
                return ("foreign", f"carries a {DISK_TIER_MARKER} marker the harness did not write for it: "
                        f"{check.reason}", False)
            contents = check_contents(path, check.nonce)
            if contents.foreign or contents.overflow:
                return "foreign", contents.describe(), True
            return "ours", "", True
        with os.scandir(path) as entries:
            for _ in entries:
                return "foreign", NO_MARKER_FILES, False
    except OSError:
        return "unreadable", "", False
    return "empty", "", False


def inspect(path: Path) -> tuple[str, str]:
    """The directory's :func:`ownership` state and, for ``foreign``, why it is not the harness's."""
    state, why, _marked = _inspect(path)
    return state, why


def ownership(path: Path) -> str:
    """``absent``, ``empty``, ``ours`` (a marker the harness wrote for this directory), ``foreign`` (files the
    harness did not create, a marker it did not write for it, or not a directory) or ``unreadable`` (the harness
    may not look inside)."""
    return inspect(path)[0]


def refusal(path: Path) -> str:
    """Why a foreign directory is refused and what to do, for messages (``holds files ...; give ...``)."""
    why = inspect(path)[1] or NO_MARKER_FILES
    return f"{why}; the harness never deletes what it did not create, so nothing in it is touched: {WHAT_TO_DO}"


def claim(path: Path, run_id: str) -> None:
    """Create (if absent) and mark the directory as the harness's. Refuses a foreign or unreadable directory.

    A directory already the harness's keeps its marker (reused across runs)."""
    validate_root_dir(str(path))
    state = ownership(path)
    if state == "foreign":
        raise DiskTierError(f"{path} {refusal(path)}")
    if state == "unreadable":
        raise DiskTierError(f"{path} cannot be read by this user; give a directory the harness may write")
    if state == "ours":
        return
    path.mkdir(parents=True, exist_ok=True)
    write_marker(path, run_id)


def begin_session(path: Path, engine: str, run_id: str) -> Callable[[], None]:
    """Record that an engine of kind ``engine`` the harness launches now writes into ``path`` (the harness's own
    directory); returns what ends the session (call it once the server has stopped)."""
    check = check_marker(path)
    if not check.valid:
        raise DiskTierError(f"{path}: {check.reason}")
    nonce = check.nonce
    started = open_session(nonce, engine, run_id)
    done: list[bool] = []

    def end() -> None:
        if not done:
            done.append(True)
            close_session(nonce, started)

    return end


def _gone(action: Callable[[str], None], path: str) -> int:
    """Run ``os.unlink`` or ``os.rmdir`` on ``path``: 1 if removed, 0 if it vanished or (a directory) refilled."""
    try:
        action(path)
    except FileNotFoundError:
        return 0
    except OSError as exc:
        if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
            return 0  # the engine wrote a new entry while we emptied the directory; a later clear takes it
        raise
    return 1


def _remove_tree(top: str) -> int:
    """Remove a directory bottom-up without following links; returns entries removed (itself included)."""
    removed = 0
    for root, dirs, files in os.walk(top, topdown=False, followlinks=False):
        for name in files:
            removed += _gone(os.unlink, os.path.join(root, name))
        for name in dirs:
            sub = os.path.join(root, name)
            removed += _gone(os.unlink if os.path.islink(sub) else os.rmdir, sub)
    return removed + _gone(os.rmdir, top)


def clear_contents(path: Path) -> int:
    """Delete the tier's contents (fresh arm, cache-loss drill) in a directory the harness owns, keeping the marker.

    Returns the number of entries removed (files, links and directories, counted recursively). Safe while an engine
    writes into the directory: entries that vanish meanwhile are skipped, and links are removed, never followed.
    Raises :class:`DiskTierError` for a directory without the harness's marker.
    """
    validate_root_dir(str(path))
    state, why, marked = _inspect(path)
    if state != "ours" and marked:
        raise DiskTierError(f"refusing to delete in {path}: it {why}; nothing in it was touched")
    if state != "ours":
        detail = why if why and why != NO_MARKER_FILES else f"{DISK_TIER_MARKER} is missing"
        raise DiskTierError(f"refusing to delete in {path}: it is not marked as created by the harness ({detail})")
    removed = 0
    with os.scandir(path) as it:
        entries = [e for e in it if e.name != DISK_TIER_MARKER]
    for entry in entries:
        if entry.is_dir(follow_symlinks=False):
            removed += _remove_tree(entry.path)
        else:
            removed += _gone(os.unlink, entry.path)
    return removed
