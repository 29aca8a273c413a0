"""``harness load-worker --master HOST:PORT``: a load worker on another machine that serves every step of a run.

Each step of a run binds a locust master at the scenario's ``load.master_bind_host:master_port``; this command runs
one worker process per step (``python -m harness.load.locust_runner worker``, in its own session, tied to this
process by a parent watchdog), waits for the next step's master between steps, and ends:

- exit 0 when the master says the run is over (the harness does so at the end of a run), or when no master came
  for ``--idle-timeout`` seconds after at least one step was served;
- exit 4 when no master came at all within ``--idle-timeout`` seconds (or what answers at ``--master`` is not a
  locust master: each handshake gets only what is left of the idle timeout), or a worker process failed;
- a worker that came after a step's workers were fixed is refused by that step's master: it says so and tries
  again after :data:`REFUSED_PAUSE_S`;
- exit 2 for a bad ``--master``; exit 130 on Ctrl-C (the current step's records are sent first, within a few s).

This process never imports locust or gevent. Text from the master (arm and step names) is shown through
:func:`harness.core.term.safe_text`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

from harness.config.load import valid_bind_host
from harness.core.exit_codes import ExitCode
from harness.core.term import safe_text
from harness.host.watchdog import child_env
from harness.load.protocol import INTERRUPTED, NO_MASTER, NOT_A_MASTER, REFUSED, STEP_SERVED
from harness.load.protocol import RUN_OVER_EXIT as RUN_OVER

MAX_STEPS = 100_000
STOP_GRACE_S = 15.0  # after Ctrl-C: the worker halts its share and sends its records
POLL_S = 0.1
LOG_TAIL = 10
REFUSED_PAUSE_S = 5.0  # a refused worker (the step had started without it) waits this long before trying again


def parse_master(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too); raises ValueError naming the problem."""
    host, sep, port_text = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host:
        raise ValueError(f"--master {text!r}: give HOST:PORT, e.g. 10.0.0.5:5557")
    if not valid_bind_host(host) or host in ("*", "0.0.0.0", "::"):
        raise ValueError(f"--master {text!r}: {host!r} is not a host name or address to connect to")
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"--master {text!r}: the port should be a number from 1 to 65535")
    return host, int(port_text)


def _say(line: str) -> None:
    typer.echo(f"harness load-worker: {line}", err=True)


class WorkerLoop:
    """Run one worker process per step until the run is over, the idle timeout passes, or Ctrl-C."""

    def __init__(self, host: str, port: int, idle_timeout_s: float, work_dir: Path) -> None:
        self.host, self.port, self.idle_timeout_s, self.work_dir = host, port, idle_timeout_s, work_dir
        self.served = 0
        self.not_a_master = False  # something answered at the port, but not a locust master's handshake

    def _start(self, timeout_s: float, n: int) -> tuple[subprocess.Popen[bytes], Path, Path]:
        status, log_path = self.work_dir / f"step-{n}.json", self.work_dir / f"worker-{n}.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", "harness.load.locust_runner", "worker", "--master-host",
                                     self.host, "--master-port", str(self.port), "--connect-timeout",
                                     f"{timeout_s:.1f}", "--status-file", str(status)],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, env={**os.environ, **child_env()})
        return proc, status, log_path

    def _wait(self, proc: subprocess.Popen[bytes]) -> int:
        """The worker's exit status; Ctrl-C is relayed to it (SIGINT, then SIGTERM, then SIGKILL)."""
        try:
            while proc.poll() is None:
                time.sleep(POLL_S)
            return proc.returncode
        except KeyboardInterrupt:
            _stop(proc)
            raise

    def run(self) -> int:
        """The loop; returns the exit status."""
        idle_since = time.monotonic()
        for n in range(MAX_STEPS):
            left = self.idle_timeout_s - (time.monotonic() - idle_since)
            if left <= 0:
                break
            proc, status, log_path = self._start(left, n)
            code = self._wait(proc)
            if code == STEP_SERVED:
                self.served += 1
                _say(_served_line(status, self.served))
                idle_since = time.monotonic()
            elif code == RUN_OVER:
                _say(f"the master says the run is over; served {self.served} step(s)")
                return ExitCode.OK
            elif code == NO_MASTER:
                break
            elif code == NOT_A_MASTER:
                self.not_a_master = True
            elif code == REFUSED:
                _say("the master's step went on without this worker (it came late, or the step failed before it "
                     "started); waiting for the next step")
                time.sleep(max(0.0, min(REFUSED_PAUSE_S, self.idle_timeout_s - (time.monotonic() - idle_since))))
            elif code == INTERRUPTED:
                _say("interrupted")
                return INTERRUPTED
            else:
                _say(f"the worker process failed (exit {code}); its last log lines:\n" + _tail(log_path))
                return ExitCode.FAILED
        if self.served:
            _say(f"no master at {self.host}:{self.port} for {self.idle_timeout_s:g} s after {self.served} step(s); "
                 "ending")
            return ExitCode.OK
        if self.not_a_master:
            _say(f"something at {self.host}:{self.port} accepts connections but is not a harness run's locust "
                 f"master (no handshake within {self.idle_timeout_s:g} s): check --master")
        else:
            _say(f"no master answered at {self.host}:{self.port} within {self.idle_timeout_s:g} s (is the run "
                 "started, with load.remote_workers and this master_port, and the port open?)")
        return ExitCode.FAILED


def _stop(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait_s in ((signal.SIGINT, STOP_GRACE_S), (signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _served_line(status: Path, count: int) -> str:
    try:
        data = json.loads(status.read_text(encoding="utf-8")[:4096])
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict):
        return f"step {count} served"
    def shown(key: str, limit: int = 64) -> str:
        return safe_text(str(data.get(key, "?"))[:limit])

    error = f"; error: {shown('error', 300)}" if data.get("error") else ""
    return f"served {shown('arm')} step {shown('step_label')} as rank {shown('rank', 8)}: {shown('requests', 12)} " \
        f"requests{error}"


def _tail(log_path: Path) -> str:
    try:
        with log_path.open("rb") as fh:
            fh.seek(max(0, log_path.stat().st_size - 8192))
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return "(no log)"
    return safe_text("\n".join(text.splitlines()[-LOG_TAIL:]), multiline=True)


def load_worker_command(
    master: Annotated[str, typer.Option("--master", help="the run's master, HOST:PORT (the scenario's "
                                        "load.master_bind_host address as seen from here, and load.master_port)",
                                        show_default=False)],
    idle_timeout: Annotated[float, typer.Option("--idle-timeout", min=1.0, max=86_400.0, help="end after this "
                                                "many seconds without a master (between arms a server restarts: "
                                                "leave room for that)")] = 900.0,
) -> None:
    """Serve every step of a run as a load worker of its master, until the master says the run is over.

    Exit 0: the run is over (or no master came for --idle-timeout s after serving steps); 4: no master at all, or
    the worker failed; 2: a bad --master; 130: Ctrl-C."""
    try:
        host, port = parse_master(master)
    except ValueError as exc:
        typer.echo(f"error: {safe_text(str(exc))}", err=True)
        raise typer.Exit(ExitCode.BAD_INPUT) from None
    _say(f"serving the steps of the master at {host}:{port} (ending after {idle_timeout:g} s without one)")
    with tempfile.TemporaryDirectory(prefix="harness-load-worker-") as tmp:
        try:
            code = WorkerLoop(host, port, idle_timeout, Path(tmp)).run()
        except KeyboardInterrupt:
            _say("interrupted (Ctrl-C): stopped")
            code = INTERRUPTED
    raise typer.Exit(code)
