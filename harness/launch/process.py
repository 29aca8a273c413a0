"""Local-process launcher: the simulator, or a bare-metal ``vllm``/``trtllm-serve`` on the host.

The server runs in its own process group (so a stop reaches its workers), its output goes to the run's log file
through a redacting pump thread, rendered config files are written to the work directory and the command's
container paths for them are rewritten to those files. Stop is SIGTERM to the group, then SIGKILL after a bound.

Each server gets ``HARNESS_PARENT`` (this process's pid and start time: the simulator's parent watchdog stops it
when this process dies) and a pid file naming this process as its owner (``harness cleanup`` stops it only once
this process is gone). A disk-tier directory the launcher has to create gets the harness's marker.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections import deque
from pathlib import Path

from harness.engines.spec import LaunchSpec
from harness.host import pidfiles
from harness.host.markers import write_marker
from harness.host.watchdog import child_env
from harness.launch.base import LaunchContext, LaunchError
from harness.launch.errors import engine_error_in_file
from harness.secrets.redact import Redactor, is_secret_name

TAIL_LINES = 200
_LIVE: dict[int, ProcessServer] = {}
_LIVE_LOCK = threading.Lock()


class ProcessServer:
    """A server running as a local child process."""

    def __init__(self, spec: LaunchSpec, proc: subprocess.Popen[bytes], log_path: Path, redactor: Redactor,
                 run_id: str = "") -> None:
        self.spec = spec
        self.run_id = run_id
        self._proc = proc
        self._log_path = log_path
        self._redact = redactor
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)
        self._stopped = False
        self._pump = threading.Thread(target=self._pump_output, name=f"log-{spec.arm}", daemon=True)
        self._pump.start()

    @property
    def base_url(self) -> str:
        return self.spec.base_url()

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _pump_output(self) -> None:
        stream = self._proc.stdout
        if stream is None:
            return
        log = None
        try:  # a log that cannot be written (disk full) must not stop the draining: the server would block
            self._log_path.parent.mkdir(parents=True, exist_ok=True)
            log = self._log_path.open("a", encoding="utf-8")
        except OSError:
            log = None
        try:
            for raw in iter(stream.readline, b""):
                line = self._redact(raw.decode("utf-8", "replace").rstrip("\n"))
                self._tail.append(line)
                if log is not None:
                    try:
                        log.write(line + "\n")
                        log.flush()
                    except OSError:
                        with contextlib.suppress(OSError):
                            log.close()
                        log = None
        finally:
            if log is not None:
                with contextlib.suppress(OSError):
                    log.close()

    def alive(self) -> bool:
        return self._proc.poll() is None

    def exit_description(self) -> str | None:
        code = self._proc.poll()
        if code is None:
            return None
        self._pump.join(timeout=2.0)
        cause = engine_error_in_file(self._log_path) if self._log_path.exists() else None
        base = self._exit_code_text(code)
        return f"{base}: {cause}" if cause else base

    def _exit_code_text(self, code: int) -> str:
        if code < 0:
            try:
                return f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"was killed by signal {-code}"
        return f"exited with code {code}"

    def log_tail(self, lines: int = 40) -> list[str]:
        if not self.alive():
            self._pump.join(timeout=2.0)
        return list(self._tail)[-lines:]

    def stop(self, timeout_s: float = 20.0) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self._proc.poll() is None:
            _signal_group(self._proc, signal.SIGTERM)
            try:
                self._proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _signal_group(self._proc, signal.SIGKILL)
                self._proc.wait(timeout=10.0)
        else:
            # The leader is gone; make sure no worker of its group outlives it.
            _signal_group(self._proc, signal.SIGKILL)
        self._pump.join(timeout=5.0)
        with _LIVE_LOCK:
            _LIVE.pop(self._proc.pid, None)
        pidfiles.forget(self.run_id, self._proc.pid)

    def kill(self) -> None:
        """Hard-kill the server (used by tests and fault drills)."""
        _signal_group(self._proc, signal.SIGKILL)

    def identity(self) -> dict[str, str]:
        return {"launcher": "process", "pid": str(self._proc.pid)}


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _materialise(spec: LaunchSpec, work_dir: Path) -> list[str]:
    """Write rendered config files and point the command at them."""
    argv = spec.argv()
    for cfg in spec.config_files:
        work_dir.mkdir(parents=True, exist_ok=True)
        local = work_dir / cfg.name
        local.write_text(cfg.content, encoding="utf-8")
        argv = [str(local) if a == cfg.container_path else a for a in argv]
    return argv


class ProcessLauncher:
    """Starts servers as local processes."""

    kind = "process"

    def start(self, spec: LaunchSpec, ctx: LaunchContext) -> ProcessServer:
        argv = _materialise(spec, ctx.work_dir)
        env = {**os.environ, **spec.env, **child_env(), "PYTHONUNBUFFERED": "1"}
        for d in spec.disk_tier_dirs:
            _make_tier_dir(Path(d), ctx.run_id)
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                start_new_session=True,
            )
        except OSError as exc:
            raise LaunchError(f"cannot execute {argv[0]!r}: {exc.strerror or exc}", phase="start") from None
        server = ProcessServer(spec, proc, ctx.log_path, Redactor([*ctx.secrets, *_values(spec.env)]), ctx.run_id)
        with _LIVE_LOCK:
            _LIVE[proc.pid] = server
        pidfiles.record(ctx.run_id, spec.arm, proc.pid)
        return server

    def cleanup(self, run_id: str | None = None) -> list[str]:
        """Stop servers this process started, and those an interrupted earlier run left (from their pid files)."""
        with _LIVE_LOCK:
            servers = list(_LIVE.values())
        removed = []
        for server in servers:
            server.stop(timeout_s=5.0)
            removed.append(f"process {server.pid} ({server.spec.arm})")
        return removed + pidfiles.kill_leftovers(run_id)


def _make_tier_dir(path: Path, run_id: str) -> None:
    """Create a missing disk-tier directory, marked as the harness's; an existing one is left as it is."""
    if path.exists() or path.is_symlink():
        return
    try:
        path.mkdir(parents=True)
        write_marker(path, run_id)
    except FileExistsError:
        return  # made meanwhile by someone else: not ours to mark
    except OSError as exc:
        raise LaunchError(f"cannot create the disk-tier directory {path}: {exc.strerror or exc}",
                          phase="start") from None


def _values(env: dict[str, str]) -> list[str]:
    return [v for k, v in env.items() if is_secret_name(k)]


def wait_port_free(port: int, timeout_s: float = 5.0) -> None:
    """Give a just-stopped server's port a moment to be released (bounded)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT leftovers do not block a server
            try:
                s.bind(("127.0.0.1", port))
                return
            except OSError:
                time.sleep(0.1)
