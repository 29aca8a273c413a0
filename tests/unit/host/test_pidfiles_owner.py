"""`harness cleanup` never stops a server whose owning run is still alive, unless that run is named."""

from __future__ import annotations

import json
import subprocess
import sys

import psutil

from harness.host import pidfiles, state


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)


def _write(server: subprocess.Popen[bytes], owner: subprocess.Popen[bytes] | None, run_id: str = "run-a") -> None:
    info: dict[str, object] = {"run_id": run_id, "arm": "baseline", "pid": server.pid,
                               "create_time": psutil.Process(server.pid).create_time()}
    if owner is not None:
        info.update(owner_pid=owner.pid, owner_create_time=psutil.Process(owner.pid).create_time())
    state.user_dir(create=True)
    path = pidfiles.servers_dir(run_id)
    path.mkdir(parents=True, exist_ok=True)
    (path / f"{server.pid}.json").write_text(json.dumps(info), encoding="utf-8")


def test_live_runs_servers_are_left_alone_unless_named() -> None:
    owner, server = _sleeper(), _sleeper()
    try:
        _write(server, owner)
        assert [r.state for r in pidfiles.records()] == ["live"]
        assert pidfiles.kill_leftovers(None) == []
        assert server.poll() is None  # still running
        found = pidfiles.kill_leftovers("run-a")
        assert len(found) == 1 and "run run-a" in found[0]
        server.wait(timeout=15)
        assert pidfiles.records() == [] and not state.run_dir("run-a").exists()
    finally:
        for proc in (owner, server):
            proc.kill()
            proc.wait(timeout=15)


def test_a_dead_runs_server_is_stopped() -> None:
    owner, server = _sleeper(), _sleeper()
    try:
        _write(server, owner)
        owner.kill()
        owner.wait(timeout=15)
        assert [r.state for r in pidfiles.records()] == ["stale"]
        assert len(pidfiles.kill_leftovers(None)) == 1
        server.wait(timeout=15)
    finally:
        server.kill()
        server.wait(timeout=15)


def test_an_ownerless_record_is_stopped_only_when_its_run_is_named() -> None:
    server = _sleeper()
    try:
        _write(server, None, run_id="run-b")
        assert [r.state for r in pidfiles.records()] == ["unknown"]
        assert pidfiles.kill_leftovers(None) == []
        assert server.poll() is None
        assert len(pidfiles.kill_leftovers("run-b")) == 1
        server.wait(timeout=15)
    finally:
        server.kill()
        server.wait(timeout=15)


def test_records_are_scoped_per_user_and_run(tmp_path_factory: object) -> None:
    import os

    assert state.user_dir().name == str(os.getuid())
    assert pidfiles.servers_dir("r/../x").parent.name != "x"  # an odd run id stays one directory
    assert pidfiles.servers_dir("r/../x").parent.parent == state.runs_dir()
