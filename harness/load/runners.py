"""Warm load runners (parent side): locust processes kept between steps so a step starts in milliseconds.

A runner is ``python -m harness.load.warm_runner DIR`` (``locust_runner serve`` under a parent watchdog) in its own
process group: it imports gevent, locust, pydantic and pyarrow once, then runs one step per ``RUN <spec file>`` line
on its stdin. The pool
keeps at most one idle runner; a runner whose step was cancelled or timed out is killed, never reused. Runners
exit when their stdin closes, and a parent watchdog (:mod:`harness.load.warm_runner`) ends one mid-step when this
process dies, so they cannot outlive it; :func:`shutdown_runners` (also run at exit) stops them explicitly. The
runner process itself runs a step's users (``warm_runner`` runs ``locust_runner`` in-process; a step with several
local processes adds its workers as the runner's children): :func:`prewarm_runner` returns its PID, so a tool
that measures the load client (``make perf``) pins and samples that process tree without guessing. Before
that, when steps of this process had remote workers, a runner tells the workers at each master address that the
run is over (``harness load-worker`` then exits), waiting at most :data:`RUN_OVER_WAIT_S` for them.

The runners' logs live in a temporary ``harness-load-runners-*`` directory holding an owner record (this process's
pid and start time). It is removed at shutdown, by a runner that finds its harness gone, and by ``harness cleanup
--all-stale`` (:func:`runner_dirs` lists them) when its owner is dead.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from harness.host.owner import ProcessRef, current, parse_pid_start, process_alive
from harness.host.state import owned_file
from harness.host.watchdog import child_env

DIR_PREFIX = "harness-load-runners-"
OWNER_FILE = "owner.json"
MAX_DIRS_LISTED = 1000
RUN_OVER_WAIT_S = 15.0  # for remote workers to reconnect after the last step (a new worker process each step)
RUNNER_START_S = 60.0  # a fresh runner's imports, on a busy host


@dataclass
class Runner:
    """One runner process and its log."""

    proc: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        """The runner's PID: the process that runs a step's users (local workers are its children)."""
        return self.proc.pid

    def alive(self) -> bool:
        """True while the process runs."""
        return self.proc.poll() is None

    def send(self, line: str) -> None:
        """Write one command line to the runner."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode("utf-8") + b"\n")
        self.proc.stdin.flush()

    def signal(self, sig: int) -> None:
        """Signal the runner's process group (its local workers included)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def log_size(self) -> int:
        """Bytes in the log so far (to read one step's part of it)."""
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def log_text(self, offset: int) -> str:
        """The log from ``offset`` on."""
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(offset)
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self, grace_s: float = 3.0) -> None:
        """Close stdin (the runner exits), then SIGTERM and SIGKILL the group if it lingers."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                self.signal(sig)
            try:
                self.proc.wait(timeout=grace_s)
                break
            except subprocess.TimeoutExpired:
                continue
        self.signal(signal.SIGKILL)  # local workers left in the group, if any


class RunnerPool:
    """At most one idle warm runner, started on demand."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[Runner] = []
        self._all: list[Runner] = []
        self._dir: Path | None = None
        self._remote: dict[tuple[str, int], tuple[int, float]] = {}  # master address -> (workers, wait)

    def note_remote(self, bind_host: str, port: int, workers: int, wait_s: float) -> None:
        """A step had ``workers`` remote workers at this master address: tell them at shutdown that the run is over."""
        with self._lock:
            known, _ = self._remote.get((bind_host, port), (0, 0.0))
            self._remote[(bind_host, port)] = (max(known, workers), min(wait_s, RUN_OVER_WAIT_S))

    def say_run_over(self) -> None:
        """Tell the remote workers of this process's steps that the run is over (bounded; best effort)."""
        with self._lock:
            remote, self._remote = dict(self._remote), {}
        for (bind_host, port), (workers, wait_s) in remote.items():
            runner = self.take()
            outcome = runner.log_path.with_name(f"bye-{port}.json")
            request = outcome.with_name(f"bye-{port}-request.json")
            request.write_text(json.dumps({"bind_host": bind_host, "port": port, "expected": workers,
                                           "wait_s": wait_s, "outcome_path": str(outcome)}), encoding="utf-8")
            with contextlib.suppress(OSError):
                runner.send(f"BYE {request}")
            deadline = time.monotonic() + RUNNER_START_S + wait_s
            while runner.alive() and not outcome.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            if outcome.exists() and runner.alive():
                self.give_back(runner)
            else:
                self.discard(runner)

    def _start(self) -> Runner:
        if self._dir is None or not self._dir.is_dir():
            self._dir = make_runner_dir()
        log_path = self._dir / f"runner-{len(self._all)}.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "harness.load.warm_runner", str(self._dir)],
                                    stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True,
                                    env={**os.environ, **child_env(), "PYTHONUNBUFFERED": "1"})
        runner = Runner(proc, log_path)
        self._all.append(runner)
        return runner

    def take(self) -> Runner:
        """An idle runner, or a new one (it may still be importing: steps queue behind that)."""
        with self._lock:
            while self._idle:
                runner = self._idle.pop()
                if runner.alive():
                    return runner
            return self._start()

    def give_back(self, runner: Runner) -> None:
        """Keep a runner that finished its step cleanly (one idle runner at most)."""
        with self._lock:
            if runner.alive() and not self._idle:
                self._idle.append(runner)
                return
        self.discard(runner)

    def discard(self, runner: Runner) -> None:
        """Stop a runner for good."""
        runner.stop()
        with self._lock:
            if runner in self._all:
                self._all.remove(runner)

    def prewarm(self) -> int | None:
        """Start an idle runner now if there is none (e.g. while the server boots); the PID of the idle runner
        the next step takes, or None when it is already gone."""
        with self._lock:
            if not any(r.alive() for r in self._idle):
                self._idle.append(self._start())
        return self.idle_pid()

    def idle_pid(self) -> int | None:
        """The PID of the idle runner the next step takes (:meth:`take`), or None when there is none."""
        with self._lock:
            for runner in reversed(self._idle):
                if runner.alive():
                    return runner.pid
        return None

    def shutdown(self) -> None:
        """Tell remote workers the run is over, stop every runner and remove their logs."""
        with contextlib.suppress(OSError):  # the temporary directory is gone or full: workers end on their idle timeout
            self.say_run_over()
        with self._lock:
            runners, self._all, self._idle = list(self._all), [], []
        for runner in runners:
            runner.stop()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def make_runner_dir() -> Path:
    """A new temporary directory for runner logs, with this process named as its owner."""
    path = Path(tempfile.mkdtemp(prefix=DIR_PREFIX))
    (path / OWNER_FILE).write_text(json.dumps({"owner": current().text()}), encoding="utf-8")
    return path


def dir_owner(path: Path) -> ProcessRef | None:
    """The process (pid, start time) from a runner directory's owner record; None when it has none this user wrote."""
    record = path / OWNER_FILE
    if not owned_file(record):
        return None
    try:
        data = json.loads(record.read_text(encoding="utf-8")[:1000])
    except (OSError, ValueError):
        return None
    return parse_pid_start(str(data.get("owner", ""))) if isinstance(data, dict) else None


def orphaned(path: Path) -> bool:
    """A runner directory of this user whose owning harness process is gone."""
    owner = dir_owner(path)
    return path.name.startswith(DIR_PREFIX) and owner is not None and not process_alive(*owner)


def remove_if_orphaned(path: Path) -> bool:
    """Remove a runner directory whose owner is dead; returns whether it was removed."""
    if not orphaned(path):
        return False
    shutil.rmtree(path, ignore_errors=True)
    return not path.exists()


def runner_dirs() -> list[Path]:
    """This user's runner directories in the temporary directory (at most :data:`MAX_DIRS_LISTED`)."""
    found: list[Path] = []
    with contextlib.suppress(OSError), os.scandir(tempfile.gettempdir()) as entries:
        for entry in entries:
            if len(found) >= MAX_DIRS_LISTED:
                break
            if not entry.name.startswith(DIR_PREFIX):
                continue
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False) and entry.stat(follow_symlinks=False).st_uid == os.getuid():
                    found.append(Path(entry.path))
    return sorted(found)


POOL = RunnerPool()
atexit.register(POOL.shutdown)


def prewarm_runner() -> int | None:
    """Start a warm load runner in the background so the next step does not wait for its imports.

    Returns the PID of the idle runner the next step runs in (None when it died at once): the process whose tree
    does the step's work, for a caller that pins or measures the load client.
    """
    return POOL.prewarm()


def shutdown_runners() -> None:
    """Stop all warm load runners (done at interpreter exit anyway)."""
    POOL.shutdown()
