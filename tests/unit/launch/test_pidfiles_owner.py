"""`harness cleanup` never stops a server whose owning run is still alive, unless that run is named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from harness.launch import pidfiles


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)


def _write(path: Path, server: subprocess.Popen[bytes], owner: subprocess.Popen[bytes] | None) -> None:
    info = {"run_id": "run-a", "arm": "baseline", "pid": server.pid,
            "create_time": psutil.Process(server.pid).create_time()}
    if owner is not None:
        info.update(owner_pid=owner.pid, owner_create_time=psutil.Process(owner.pid).create_time())
    path.mkdir(parents=True, exist_ok=True)
    (path / f"{server.pid}.json").write_text(json.dumps(info), encoding="utf-8")


def test_live_runs_servers_are_left_alone_unless_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_STATE_DIR", str(tmp_path))
    owner, server = _sleeper(), _sleeper()
    try:
        _write(pidfiles.state_dir(), server, owner)
        assert pidfiles.kill_leftovers(None) == []
        assert server.poll() is None  # still running
        found = pidfiles.kill_leftovers("run-a")
        assert len(found) == 1 and "run run-a" in found[0]
        server.wait(timeout=15)
    finally:
        for proc in (owner, server):
            proc.kill()
            proc.wait(timeout=15)


def test_a_dead_runs_server_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HARNESS_STATE_DIR", str(tmp_path))
    owner, server = _sleeper(), _sleeper()
    try:
        _write(pidfiles.state_dir(), server, owner)
        owner.kill()
        owner.wait(timeout=15)
        assert len(pidfiles.kill_leftovers(None)) == 1
        server.wait(timeout=15)
    finally:
        server.kill()
        server.wait(timeout=15)
