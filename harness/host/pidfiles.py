"""Pid files for local-process servers, so ``harness cleanup`` can stop what an interrupted (killed) run left.

Each started server writes ``<user state dir>/runs/<run id>/servers/<pid>.json`` (see :mod:`.state`): run id, arm,
the server's pid and start time, and its owner, the harness process that started it (host, uid, pid, start time).
A clean stop removes it. A record is ``live`` while its owner runs, ``stale`` once the owner is gone and the server
still runs, ``gone`` when the server has exited, and ``unknown`` when it names no owner or another host; only the
first two can be stopped and a process is signalled only while its start time still matches (a recycled pid is
never touched).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import psutil

from harness.host import state
from harness.host.owner import current, process_alive, ref_of, this_host

MAX_RECORDS = 10_000
MAX_RECORD_BYTES = 64 * 1024


def servers_dir(run_id: str) -> Path:
    """Where one run's server records live."""
    return state.run_dir(run_id) / "servers"


def record(run_id: str, arm: str, pid: int) -> None:
    """Remember a started server (best effort: a pid file that cannot be written only weakens cleanup)."""
    try:
        server = ref_of(pid)
        me = current()
        state.user_dir(create=True)
        path = servers_dir(run_id)
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        (path / f"{pid}.json").write_text(json.dumps({
            "run_id": run_id, "arm": arm, "pid": pid, "create_time": server.start,
            "create_since_boot": server.since_boot, "owner_host": me.host, "owner_uid": me.uid, "owner_pid": me.pid,
            "owner_create_time": me.start, "owner_since_boot": me.since_boot, "boot_id": me.boot}),
            encoding="utf-8")
    except (OSError, psutil.Error):
        return


def forget(run_id: str, pid: int) -> None:
    """The server was stopped cleanly: drop its record (and the run's state directory once empty)."""
    with contextlib.suppress(OSError):
        (servers_dir(run_id) / f"{pid}.json").unlink()
    _prune(servers_dir(run_id))


def _prune(servers: Path) -> None:
    for directory in (servers, servers.parent):
        with contextlib.suppress(OSError):
            directory.rmdir()  # only when empty


@dataclass(frozen=True)
class ServerRecord:
    """One recorded server and what is known of its owner now."""

    path: Path
    run_id: str
    arm: str
    pid: int
    state: str   # live | stale | gone | unknown
    why: str     # the owner, in words
    local: bool  # recorded on this host (its pid means something here)

    def describe(self) -> str:
        return f"process {self.pid} (run {self.run_id}, arm {self.arm})"


def _seconds(value: object) -> float | None:
    """A recorded since-boot start (None where the record has none: an older harness, no ``/proc``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
        return None
    return float(value)


def _classify(info: dict[str, object]) -> tuple[str, str, bool]:
    host = str(info.get("owner_host", this_host()))
    if host != this_host():
        return "unknown", f"started by a harness on host {host[:100]!r}", False
    try:
        pid, created = int(str(info["pid"])), float(str(info["create_time"]))
    except (KeyError, ValueError):
        return "gone", "unreadable record", True
    boot = str(info.get("boot_id") or "")[:64]
    if not process_alive(pid, created, _seconds(info.get("create_since_boot")), boot):
        return "gone", "the server has exited", True
    try:
        owner_pid, owner_start = int(str(info["owner_pid"])), float(str(info["owner_create_time"]))
    except (KeyError, ValueError):
        return "unknown", "its record names no owning harness process", True
    if process_alive(owner_pid, owner_start, _seconds(info.get("owner_since_boot")), boot):
        return "live", f"its harness process {owner_pid} is running", True
    return "stale", f"its harness process {owner_pid} is gone", True


def records(run_id: str | None = None) -> list[ServerRecord]:
    """This user's server records (of one run, or all), at most :data:`MAX_RECORDS`."""
    try:
        root = state.runs_dir()
        runs = [state.run_dir(run_id)] if run_id is not None else sorted(root.iterdir()) if root.is_dir() else []
    except OSError:
        return []
    found: list[ServerRecord] = []
    for run in runs:
        with contextlib.suppress(OSError):
            for entry in sorted((run / "servers").glob("*.json")) if (run / "servers").is_dir() else []:
                if len(found) >= MAX_RECORDS:
                    return found
                parsed = _parse(entry)
                if parsed is not None:
                    found.append(parsed)
    return found


def _parse(entry: Path) -> ServerRecord | None:
    if not state.owned_file(entry):
        return None
    try:
        info = json.loads(entry.read_text(encoding="utf-8")[:MAX_RECORD_BYTES])
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict):
        return None
    status, why, local = _classify(info)
    try:
        pid = int(str(info.get("pid")))
    except ValueError:
        pid = 0
    return ServerRecord(path=entry, run_id=str(info.get("run_id", entry.parent.parent.name))[:200],
                        arm=str(info.get("arm", "?"))[:100], pid=pid, state=status, why=why, local=local)


def stoppable(rec: ServerRecord, *, named: bool) -> bool:
    """Whether cleanup may stop it: a stale server always; with its run named, any server running on this host."""
    if named:
        return rec.local and rec.state in ("live", "stale", "unknown")
    return rec.state == "stale"


def stop(rec: ServerRecord) -> None:
    """Stop the recorded server (SIGTERM to its group, SIGKILL after 10 s) and drop its record."""
    if not rec.local:
        return
    if rec.state != "gone":
        try:
            proc: psutil.Process | None = psutil.Process(rec.pid)
        except psutil.Error:
            proc = None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(rec.pid, signal.SIGTERM)
        if proc is not None:
            try:
                proc.wait(timeout=10)
            except psutil.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(rec.pid, signal.SIGKILL)
            except psutil.Error:
                pass
    with contextlib.suppress(OSError):
        rec.path.unlink()
    _prune(rec.path.parent)


def kill_leftovers(run_id: str | None = None, *, dry_run: bool = False) -> list[str]:
    """Stop recorded servers of runs whose harness is gone (or, with ``run_id``, every server of that run on this
    host, live or not); records of servers that exited are dropped. Returns what was (dry run: would be) stopped."""
    found: list[str] = []
    for rec in records(run_id):
        if rec.state == "gone":
            if not dry_run:
                stop(rec)  # drops the record
            continue
        if not stoppable(rec, named=run_id is not None):
            continue
        found.append(rec.describe())
        if not dry_run:
            stop(rec)
    return found
