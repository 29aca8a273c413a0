"""Pid files for local-process servers, so ``harness cleanup`` can stop what an interrupted (killed) run left.

Each started server writes ``<state dir>/<pid>.json`` (run id, arm, pid, the process's start time, and the owning
harness process's pid and start time); a clean stop removes it. Cleanup only signals a pid whose start time still
matches, so a recycled pid is never touched, and never a server whose owning run is still alive unless that run's
id is named explicitly: a cleanup must not end another live run.
State dir: ``$HARNESS_STATE_DIR`` or ``~/.cache/kvoffload-harness/processes``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

import psutil


def state_dir() -> Path:
    """Where pid files live."""
    root = os.environ.get("HARNESS_STATE_DIR") or str(Path.home() / ".cache" / "kvoffload-harness")
    return Path(root) / "processes"


def record(run_id: str, arm: str, pid: int) -> None:
    """Remember a started server (best effort: a pid file that cannot be written only weakens cleanup)."""
    try:
        created = psutil.Process(pid).create_time()
        path = state_dir()
        path.mkdir(parents=True, exist_ok=True)
        owner = psutil.Process(os.getpid())
        (path / f"{pid}.json").write_text(json.dumps({"run_id": run_id, "arm": arm, "pid": pid,
                                                      "create_time": created, "owner_pid": owner.pid,
                                                      "owner_create_time": owner.create_time()}), encoding="utf-8")
    except (OSError, psutil.Error):
        return


def forget(pid: int) -> None:
    """The server was stopped cleanly."""
    with contextlib.suppress(OSError):
        (state_dir() / f"{pid}.json").unlink()


def _owner_alive(info: dict[str, object]) -> bool:
    """The harness process that started the server still runs (and is the same process, not a recycled pid)."""
    try:
        owner_pid = int(str(info["owner_pid"]))
        owner_created = float(str(info["owner_create_time"]))
    except (KeyError, ValueError):
        return False
    if owner_pid == os.getpid():
        return False  # this process's own leftovers (its cleanup stops them deliberately)
    try:
        proc = psutil.Process(owner_pid)
        return proc.is_running() and abs(proc.create_time() - owner_created) < 1.0
    except psutil.Error:
        return False


def kill_leftovers(run_id: str | None = None, *, dry_run: bool = False) -> list[str]:
    """Stop (SIGTERM, then SIGKILL) recorded servers that still run and whose run has ended (or, with ``run_id``,
    that run's servers); returns what was found."""
    found: list[str] = []
    directory = state_dir()
    if not directory.is_dir():
        return found
    for entry in sorted(directory.glob("*.json"))[:10_000]:
        try:
            info = json.loads(entry.read_text(encoding="utf-8"))
            pid = int(info["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if run_id is not None and info.get("run_id") != run_id:
            continue
        try:
            proc = psutil.Process(pid)
            alive = abs(proc.create_time() - float(info.get("create_time", -1))) < 1.0 and proc.is_running()
        except psutil.Error:
            alive = False
        if not alive:
            if not dry_run:
                with contextlib.suppress(OSError):
                    entry.unlink()
            continue
        if run_id is None and _owner_alive(info):
            continue  # a live run's server: never ours to stop without its run id
        found.append(f"process {pid} (run {info.get('run_id')}, arm {info.get('arm')})")
        if dry_run:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except psutil.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        except psutil.Error:
            pass
        with contextlib.suppress(OSError):
            entry.unlink()
    return found
