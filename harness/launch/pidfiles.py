"""Pid files for local-process servers, so ``harness cleanup`` can stop what an interrupted (killed) run left.

Each started server writes ``<state dir>/<pid>.json`` (run id, arm, pid, the process's start time); a clean stop
removes it. Cleanup only signals a pid whose start time still matches, so a recycled pid is never touched.
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
        (path / f"{pid}.json").write_text(json.dumps({"run_id": run_id, "arm": arm, "pid": pid,
                                                      "create_time": created}), encoding="utf-8")
    except (OSError, psutil.Error):
        return


def forget(pid: int) -> None:
    """The server was stopped cleanly."""
    with contextlib.suppress(OSError):
        (state_dir() / f"{pid}.json").unlink()


def kill_leftovers(run_id: str | None = None, *, dry_run: bool = False) -> list[str]:
    """Stop (SIGTERM, then SIGKILL) recorded servers that still run; returns what was found."""
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
