"""Issue 17, ownership: nothing the harness did not create is touched.

- A disk-tier marker that was copied, hand-made (empty), old-format or made elsewhere does not make a directory the
  harness's: ``plan`` and ``run`` refuse it (exit 2, naming the field and why) and no file in it changes.
- ``harness cleanup`` never ends a live run (default: lists only; ``--all-stale`` skips it; ``--run-id`` refuses
  without ``--force``), and stops a run's servers once its harness process is gone.
- After SIGKILL of the harness process, the simulator and the load runners end by themselves within seconds (parent
  watchdog) and the runners' temporary directory is removed.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
from rel_support import file_sums, tiered_arm
from typer.testing import CliRunner

from harness.cli import app
from harness.host import pidfiles, state, watchdog
from harness.host.disk_tier import DiskTierError, claim, clear_contents, ownership
from harness.host.labels import DISK_TIER_MARKER
from harness.load.runners import DIR_PREFIX, OWNER_FILE
from harness.sim.cache.fs import FsTier

HARNESS = [sys.executable, "-m", "harness"]
CLI_TIMEOUT_S = 60
WATCHDOG_BOUND_S = 6.0  # the watchdog polls every 0.5 s and allows a 5 s grace for a clean stop


def _user_dir(path: Path) -> Path:
    (path / "photos").mkdir(parents=True)
    (path / "thesis.tex").write_text("years of work\n")
    (path / "photos" / "a.jpg").write_bytes(os.urandom(4096))
    return path


def _copy_of_real(tmp: Path, target: Path) -> None:
    real = tmp / "real-tier"
    claim(real, "run-that-made-it")  # what a run does before its arm starts
    shutil.copy2(real / DISK_TIER_MARKER, target / DISK_TIER_MARKER)


def _other_host(tmp: Path, target: Path) -> None:
    real = tmp / "real-tier"
    claim(real, "r")
    marker = json.loads((real / DISK_TIER_MARKER).read_text())
    (target / DISK_TIER_MARKER).write_text(json.dumps({**marker, "host": "elsewhere", "path": str(target)}))


def _not_in_ledger(tmp: Path, target: Path) -> None:
    """A marker like the harness's for this very directory, but no ledger entry (another machine, another user)."""
    real = tmp / "real-tier"
    claim(real, "r")
    marker = json.loads((real / DISK_TIER_MARKER).read_text())
    (target / DISK_TIER_MARKER).write_text(json.dumps({**marker, "path": os.path.realpath(target),
                                                       "nonce": "0" * 32}))


PLANTS: dict[str, tuple[Callable[[Path, Path], object], str]] = {
    "copied": (_copy_of_real, "made for another directory"),
    "zero-byte": (lambda _t, d: (d / DISK_TIER_MARKER).write_bytes(b""), "not written by this version"),
    "old-format": (lambda _t, d: (d / DISK_TIER_MARKER).write_text(
        '{"owner": "kvoffload-harness", "claimed_by_run": "x"}\n'), "not written by this version"),
    "other-host": (_other_host, "another host"),
    "not-in-ledger": (_not_in_ledger, "not in this user's ledger"),
}


@pytest.mark.parametrize("kind", sorted(PLANTS))
def test_a_planted_marker_does_not_make_a_directory_ours(kind: str, tmp_path: Path, state_dir: Path) -> None:
    user = _user_dir(tmp_path / "mine")
    plant, reason = PLANTS[kind]
    plant(tmp_path, user)
    before = file_sums(user)
    assert ownership(user) == "foreign"
    with pytest.raises(DiskTierError, match=reason):
        claim(user, "a-new-run")  # a fresh arm claims, then empties
    with pytest.raises(DiskTierError, match="refusing to delete"):
        clear_contents(user)  # the fresh-arm clearing and the cache-loss drill
    assert file_sums(user) == before, "no file changed, the planted marker included"


def test_a_marker_the_harness_wrote_stays_valid_across_runs(tmp_path: Path, state_dir: Path) -> None:
    tier = tmp_path / "tier"
    claim(tier, "run-1")
    marker = (tier / DISK_TIER_MARKER).read_bytes()
    FsTier(tier, namespace=0, chunk_tokens=256, chunk_bytes=1 << 20).write(1)  # the engine's files
    claim(tier, "run-2")
    assert ownership(tier) == "ours" and (tier / DISK_TIER_MARKER).read_bytes() == marker
    assert clear_contents(tier) == 3  # the chunk file and its two directories


def _cli(*args: str, env: dict[str, str] | None = None,
         timeout: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HARNESS, *args], capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


def test_plan_and_run_refuse_planted_markers(scenario: Callable[..., Path], tmp_path: Path, state_dir: Path) -> None:
    copied, empty = _user_dir(tmp_path / "copied"), _user_dir(tmp_path / "empty-marker")
    _copy_of_real(tmp_path, copied)
    (empty / DISK_TIER_MARKER).write_bytes(b"")
    sums = {d: file_sums(d) for d in (copied, empty)}
    path = scenario("planted", arms=("baseline",), extra_arms=[tiered_arm("copied", copied),
                                                                tiered_arm("empty", empty)])
    started = time.monotonic()
    plan = _cli("plan", str(path))
    run = _cli("run", str(path), "--out", str(tmp_path / "results"), "--no-validate")
    took = time.monotonic() - started
    for proc in (plan, run):
        out = " ".join((proc.stdout + proc.stderr).split())
        assert proc.returncode == 2, out
        assert "Traceback" not in out
        assert "arms[1].offload.secondary_tiers[0].root_dir: " + str(copied) in out
        assert "arms[2].offload.secondary_tiers[0].root_dir: " + str(empty) in out
        assert "made for another directory" in out and "not written by this version" in out
        assert "nothing in it is touched" in out and "give an empty or new directory" in out
    assert "is ours" not in plan.stdout
    assert took < 2 * CLI_TIMEOUT_S
    for target in (copied, empty):
        assert file_sums(target) == sums[target], f"a file in {target} changed"


# --- cleanup ------------------------------------------------------------------------------------------------------

def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)


def _record(server: subprocess.Popen[bytes], owner: subprocess.Popen[bytes], run_id: str) -> None:
    """A pid file as the process launcher writes it, with ``owner`` as the run's harness process."""
    state.user_dir(create=True)
    path = pidfiles.servers_dir(run_id)
    path.mkdir(parents=True, exist_ok=True)
    (path / f"{server.pid}.json").write_text(json.dumps({
        "run_id": run_id, "arm": "baseline", "pid": server.pid, "create_time": psutil.Process(server.pid).create_time(),
        "owner_host": os.uname().nodename, "owner_uid": os.getuid(), "owner_pid": owner.pid,
        "owner_create_time": psutil.Process(owner.pid).create_time()}))


def _runner_dir(tmp: Path, owner: subprocess.Popen[bytes], name: str) -> Path:
    path = tmp / f"{DIR_PREFIX}{name}"
    path.mkdir()
    (path / OWNER_FILE).write_text(json.dumps({"owner": f"{owner.pid}:{psutil.Process(owner.pid).create_time():.3f}"}))
    (path / "runner-0.log").write_text("log\n")
    return path


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=15)


def test_cleanup_spares_live_runs_and_stops_those_whose_harness_died(
        tmp_path: Path, state_dir: Path, procs: list[subprocess.Popen[bytes]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr("tempfile.tempdir", None)
    live_owner, live_server, dead_owner, dead_server = (_sleeper() for _ in range(4))
    procs += [live_owner, live_server, dead_owner, dead_server]
    _record(live_server, live_owner, "run-live")
    _record(dead_server, dead_owner, "run-dead")
    live_dir, dead_dir = _runner_dir(tmp, live_owner, "live"), _runner_dir(tmp, dead_owner, "dead")
    cli = CliRunner()
    started = time.monotonic()

    listing = cli.invoke(app, ["cleanup"])  # both owners alive: everything is live, nothing removed
    assert listing.exit_code == 0 and "run run-live: live" in listing.output and "Nothing was removed" in listing.output
    out = cli.invoke(app, ["cleanup", "--all-stale"])
    assert out.exit_code == 0 and "Nothing to remove" in out.output, out.output
    out = cli.invoke(app, ["cleanup", "--run-id", "run-live"])
    assert out.exit_code == 2 and "still running" in out.output and "--force" in out.output
    assert live_server.poll() is None and dead_server.poll() is None

    dead_owner.send_signal(signal.SIGKILL)  # the second run's harness is killed
    dead_owner.wait(timeout=15)
    listing = cli.invoke(app, ["cleanup"])
    assert listing.exit_code == 0 and "run run-dead: stale" in listing.output and "run run-live: live" in listing.output
    assert dead_server.poll() is None and dead_dir.is_dir(), "the default is a dry run"
    out = cli.invoke(app, ["cleanup", "--all-stale"])
    assert out.exit_code == 0, out.output
    assert f"Stopped process {dead_server.pid} (run run-dead" in out.output and str(dead_dir) in out.output
    dead_server.wait(timeout=15)
    assert not dead_dir.exists() and live_dir.is_dir() and live_server.poll() is None
    assert [r.run_id for r in pidfiles.records()] == ["run-live"]

    out = cli.invoke(app, ["cleanup", "--run-id", "run-live", "--force"])
    assert out.exit_code == 0 and f"Stopped process {live_server.pid}" in out.output
    live_server.wait(timeout=15)
    assert time.monotonic() - started < 40


# --- a live run, then SIGKILL of its harness ----------------------------------------------------------------------

def _lines(proc: subprocess.Popen[str]) -> queue.Queue[str]:
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))

    threading.Thread(target=pump, daemon=True).start()
    return lines


def _wait_line(lines: queue.Queue[str], needle: str, timeout_s: float) -> list[str]:
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            continue
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"no line with {needle!r} within {timeout_s} s: {seen[-20:]}")


def _alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.Error:
            continue
    return out


def test_a_live_run_survives_cleanup_and_its_servers_end_after_sigkill(
        scenario: Callable[..., Path], tmp_path: Path, state_dir: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    path = scenario("live", arms=("baseline", "cpu-16g-disk"),
                    steps={"levels": [{"concurrency": 2, "duration_s": 30}]})
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONUNBUFFERED": "1"}
    harness = subprocess.Popen([*HARNESS, "run", str(path), "--out", str(tmp_path / "results"), "--no-validate"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                               start_new_session=True, stdin=subprocess.DEVNULL)
    family: list[int] = []
    try:
        lines = _lines(harness)
        _wait_line(lines, "[baseline] step 0", 60)
        time.sleep(0.5)  # the runner is mid-step
        family = [p.pid for p in psutil.Process(harness.pid).children(recursive=True)]
        assert len(family) >= 2, "a simulator and a load runner"
        runner_dirs = list(tmp.glob(f"{DIR_PREFIX}*"))
        assert len(runner_dirs) == 1

        for args in (["cleanup"], ["cleanup", "--all-stale"]):
            out = _cli(*args, env={"TMPDIR": str(tmp)})
            assert out.returncode == 0 and "Traceback" not in out.stderr, out.stdout + out.stderr
            assert _alive(family) == family, f"`harness {' '.join(args)}` ended part of a live run"
        assert "live" in out.stdout or "Nothing to remove" in out.stdout
        run_id = next(r.run_id for r in pidfiles.records())
        out = _cli("cleanup", "--run-id", run_id)
        assert out.returncode == 2 and "still running" in out.stderr, out.stdout + out.stderr
        assert _alive(family) == family and harness.poll() is None

        harness.send_signal(signal.SIGKILL)  # the harness process only: its children are in other sessions
        harness.wait(timeout=15)
        killed = time.monotonic()
        while _alive(family) and time.monotonic() - killed < WATCHDOG_BOUND_S + 5:
            time.sleep(0.1)
        took = time.monotonic() - killed
        assert not _alive(family), f"still running {took:.1f} s after the harness was killed: {_alive(family)}"
        assert took < WATCHDOG_BOUND_S, f"the watchdog took {took:.1f} s"
        print(f"simulator and load runner gone {took:.2f} s after SIGKILL of the harness")
        deadline = time.monotonic() + 5
        while list(tmp.glob(f"{DIR_PREFIX}*")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not list(tmp.glob(f"{DIR_PREFIX}*")), "the load runners' temporary directory was removed"
        out = _cli("cleanup", "--all-stale")
        assert out.returncode == 0 and "Nothing to remove" in out.stdout, out.stdout + out.stderr
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait(timeout=15)
        for pid in _alive(family):
            os.kill(pid, signal.SIGKILL)


def test_the_watchdog_runs_only_when_the_launcher_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """A simulator a user starts by hand (no ``HARNESS_PARENT``) is not tied to any process."""
    monkeypatch.delenv(watchdog.ENV, raising=False)
    assert watchdog.parent_from_env() is None
    assert watchdog.watch_parent(lambda: None) is False
    for bad in ("", "garbage", "12", "-1:5", "12:nan", "12:inf"):
        assert watchdog.parent_from_env({watchdog.ENV: bad}) is None
    parent = watchdog.parent_from_env(watchdog.child_env())
    assert parent is not None and parent[0] == os.getpid()
    assert abs(parent[1] - psutil.Process().create_time()) < 0.01
