"""What in a marked disk-tier directory the harness wrote, and what it did not: a marker alone never makes the
contents the harness's to delete.

An entry under a marked directory (files, directories and links, at any depth) is the harness's when

- it has the layout of the simulator's fs tier (``harness-sim-kv/ns-<16 hex>/`` holding ``chunks.kvseg``, its
  segment, and ``chunks.kvseg.new``, a compaction's new segment, regular files whose first bytes are the segment
  marker; or ``<16 hex>.kvsim``, the per-chunk files of earlier versions, whose first bytes are their header; see
  ``harness/sim/cache/fs.py``) or is the ``storage_pressure`` drill's filler (``harness-storage-pressure.fill``); or
- it was created or last changed (``ctime``) while an engine the harness launched for this directory ran: a
  *session*, recorded in this user's ledger (``<ledger>/<marker nonce>.sessions``) from just before the launch until
  the server was stopped. vLLM 0.32's fs tier names and nests its files itself (deterministic names, written by root
  in a container); the harness does not model that layout, so it vouches for those files by when they appeared.

Everything else is foreign: a user's ``my-notes/important.txt`` put there between runs, a file copied in, a file
changed since (``ctime`` moves on every write, rename, chmod). A directory holding a foreign entry is refused by
``plan`` (exit 2) and by the run (the arm fails) with the entries by path (a few, then a count), and nothing in it is
deleted. A session whose harness was killed (never closed) vouches for nothing after its start: what that engine
wrote is then foreign too, and the user decides. Limits, said plainly: a file a user writes into the directory while
a harness-launched vLLM runs in it is taken as the engine's (the simulator's layout is exact and has no such gap).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.core.atomic import write_text_atomic
from harness.host.labels import DISK_TIER_MARKER
from harness.host.markers import ledger_dir
from harness.host.owner import current, parse_pid_start, process_alive
from harness.host.state import owned_file, user_dir

SIM_SUBDIR = "harness-sim-kv"          # harness/sim/cache/fs.py SUBDIR (the host floor may not import the simulator)
SIM_HEADER = b"HARNESS-SIM-KV/1\n"     # harness/sim/cache/fs.py MARKER (per-chunk files of earlier versions)
SIM_SEGMENT_HEADER = b"HARNESS-SIM-KV/2 segment\n"  # harness/sim/cache/fs.py SEGMENT_MARKER
SIM_SEGMENT_FILES = ("chunks.kvseg", "chunks.kvseg.new")  # harness/sim/cache/fs.py SEGMENT_NAME, COMPACT_NAME
FILLER_NAME = "harness-storage-pressure.fill"  # harness/run/storage_pressure.py FILLER_NAME
_SIM_NS = re.compile(r"^ns-[0-9a-f]{16}$")
_SIM_FILE = re.compile(r"^[0-9a-f]{16}\.kvsim$")
SIM_ENGINE = "sim"
MAX_ENTRIES = 5_000_000   # entries looked at per check (a 10 TB tier of 2 MiB chunks); beyond: refused, unvouched
MAX_SESSIONS = 256        # per directory; the oldest are forgotten (their files then read as foreign)
MAX_LEDGER_BYTES = 256 * 1024
SHOWN = 5
SLACK_NS = 2_000_000_000  # file-system timestamps are coarse (a clock tick, 1-2 s on some file systems)
SUFFIX = ".sessions"


@dataclass(frozen=True)
class Contents:
    """The result of a check: how many entries were looked at, how many are foreign, and the first few by path."""

    checked: int
    foreign: int
    shown: tuple[str, ...]
    overflow: bool = False
    killed: tuple[str, ...] = ()  # run ids of sessions whose harness was killed (what they wrote is not vouched for)

    def describe(self) -> str:
        """``holds 2 entries the harness did not create: a, a/b`` (for messages)."""
        if self.overflow:
            return (f"holds more than {MAX_ENTRIES} entries: too many for the harness to check that it created "
                    "them all")
        n = self.foreign
        more = f", and {n - len(self.shown)} more" if n > len(self.shown) else ""
        killed = (f"; the engine of run {', '.join(self.killed)} wrote here when its harness was killed, so the "
                  "harness cannot tell its files from anyone else's" if self.killed else "")
        return (f"holds {n} entr{'y' if n == 1 else 'ies'} the harness did not create (put there or changed "
                f"after its marker was written): {', '.join(self.shown)}{more}{killed}")


# --- sessions ------------------------------------------------------------------------------------------------------

def _sessions_file(nonce: str) -> Path:
    return ledger_dir() / f"{nonce}{SUFFIX}"


def read_sessions(nonce: str) -> list[dict[str, Any]]:
    """The sessions recorded for the directory of marker ``nonce`` (a file of this user's only; else none)."""
    path = _sessions_file(nonce)
    if not owned_file(path):
        return []
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_LEDGER_BYTES + 1)
        data = json.loads(raw.decode("utf-8")) if len(raw) <= MAX_LEDGER_BYTES else None
    except (OSError, UnicodeDecodeError, ValueError):
        return []
    items = data.get("sessions") if isinstance(data, dict) else None
    return [s for s in items if isinstance(s, dict)] if isinstance(items, list) else []


def _write_sessions(nonce: str, sessions: list[dict[str, Any]]) -> None:
    user_dir(create=True)
    ledger = ledger_dir()
    ledger.mkdir(mode=0o700, exist_ok=True)
    target = _sessions_file(nonce)
    write_text_atomic(target, json.dumps({"sessions": sessions[-MAX_SESSIONS:]}) + "\n", mode=0o600)


def open_session(nonce: str, engine: str, run_id: str) -> int:
    """Record that an engine of kind ``engine`` starts writing into the directory now; returns the session's key."""
    start = time.time_ns()
    sessions = read_sessions(nonce)
    sessions.append({"engine": engine[:40], "run_id": run_id[:200], "owner": current().text(), "start_ns": start,
                     "end_ns": None})
    _write_sessions(nonce, sessions)
    return start


def close_session(nonce: str, start_ns: int) -> None:
    """The server of the session that started at ``start_ns`` (this process's) was stopped: its span ends now."""
    me = current().text()
    sessions = read_sessions(nonce)
    for s in sessions:
        if s.get("start_ns") == start_ns and s.get("owner") == me and s.get("end_ns") is None:
            s["end_ns"] = time.time_ns()
    _write_sessions(nonce, sessions)


def _killed(sessions: list[dict[str, Any]]) -> tuple[str, ...]:
    """Run ids of sessions never closed whose harness process is gone."""
    out: list[str] = []
    for s in sessions:
        if s.get("engine") == SIM_ENGINE or s.get("end_ns") is not None:
            continue
        owner = parse_pid_start(str(s.get("owner", "")))
        if owner is None or not process_alive(*owner):
            out.append(str(s.get("run_id", "?"))[:200])
    return tuple(dict.fromkeys(out))[:3]


def _spans(sessions: list[dict[str, Any]], now_ns: int) -> list[tuple[int, int]]:
    """(from, to) wall-clock nanoseconds in which an engine without a known layout wrote for the harness."""
    out: list[tuple[int, int]] = []
    for s in sessions:
        start, end = s.get("start_ns"), s.get("end_ns")
        if s.get("engine") == SIM_ENGINE or not isinstance(start, int) or isinstance(start, bool):
            continue
        if not isinstance(end, int) or isinstance(end, bool):
            owner = parse_pid_start(str(s.get("owner", "")))
            end = now_ns if owner is not None and process_alive(*owner) else start  # killed: vouches for nothing
        out.append((start - SLACK_NS, max(start, end) + SLACK_NS))
    return out


# --- contents ------------------------------------------------------------------------------------------------------

class _Gone(Exception):
    """The entry vanished between listing and reading it (an engine evicting): it is nobody's now."""


def _sim_header(path: str, header: bytes) -> bool:
    """The simulator's ``header``, or a prefix of it (a file it is creating this instant: nothing else in it yet).

    Raises ``_Gone`` when the file was deleted after it was listed: the simulator evicts chunks while the check runs
    (the cache-loss drill checks a tier the running engine writes through), and a file that is no longer there is
    neither the harness's nor anyone else's."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError as exc:
        raise _Gone(path) from exc
    except OSError:
        return False
    try:
        head = os.read(fd, len(header))
    except OSError:
        return False
    finally:
        os.close(fd)
    return header.startswith(head)


def _sim_layout(parts: tuple[str, ...], info: os.stat_result, full: str) -> bool:
    if len(parts) == 1:
        return ((parts[0] == SIM_SUBDIR and stat.S_ISDIR(info.st_mode))
                or (parts[0] == FILLER_NAME and stat.S_ISREG(info.st_mode)))
    if parts[0] != SIM_SUBDIR or not _SIM_NS.match(parts[1]):
        return False
    if len(parts) == 2:
        return stat.S_ISDIR(info.st_mode)
    if len(parts) != 3 or not stat.S_ISREG(info.st_mode):
        return False
    if parts[2] in SIM_SEGMENT_FILES:
        return _sim_header(full, SIM_SEGMENT_HEADER)
    return bool(_SIM_FILE.match(parts[2])) and _sim_header(full, SIM_HEADER)


def check_contents(path: Path, nonce: str) -> Contents:
    """Every entry under ``path`` (links not followed, the marker left out) against the simulator's layout and the
    directory's sessions; entries that vanish meanwhile (an engine evicting) are skipped."""
    sessions = read_sessions(nonce)
    spans = _spans(sessions, time.time_ns())
    checked, foreign = 0, 0
    shown: list[str] = []
    queue: deque[tuple[str, tuple[str, ...]]] = deque([(str(path), ())])
    while queue:
        top, rel = queue.popleft()
        try:
            with os.scandir(top) as it:
                names = sorted(e.name for e in it)
        except FileNotFoundError:
            continue
        for name in names:
            if not rel and name == DISK_TIER_MARKER:
                continue
            checked += 1
            if checked > MAX_ENTRIES:
                return Contents(checked, foreign, tuple(shown), overflow=True, killed=_killed(sessions))
            full, parts = os.path.join(top, name), (*rel, name)
            try:
                info = os.lstat(full)
            except FileNotFoundError:
                continue
            try:
                ours = _sim_layout(parts, info, full) or any(a <= info.st_ctime_ns <= b for a, b in spans)
            except _Gone:
                continue
            if not ours:
                foreign += 1
                if len(shown) < SHOWN:
                    shown.append("/".join(parts))
            if stat.S_ISDIR(info.st_mode):
                queue.append((full, parts))
    return Contents(checked, foreign, tuple(shown), killed=_killed(sessions) if foreign else ())


def forget(nonce: str) -> None:
    """Drop a directory's sessions (its marker's ledger entry is gone)."""
    with contextlib.suppress(OSError):
        os.unlink(_sessions_file(nonce))
