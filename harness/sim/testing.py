"""Start the simulator for tests, without pytest: :func:`running_sim`.

>>> with running_sim(profile="demo", kv_offloading_size=16, time_scale=0.1) as sim:
...     httpx.get(sim.base_url + "/v1/models")

Keyword arguments become ``serve`` flags (``kv_offloading_size=16`` -> ``--kv-offloading-size 16``; ``True`` ->
``--flag``; ``False`` -> ``--no-flag``; ``None`` -> omitted; a list repeats the flag). The server binds a free
loopback port (``--port 0``), the helper reads the port from its stdout, waits (bounded) for ``/v1/models`` to
answer 200, and on exit terminates the process (SIGTERM, then SIGKILL after a grace period). A ground-truth
file is written to a temporary directory unless ``ground_truth`` is given. If the process exits before it is
ready, :class:`SimStartError` carries its exit status and stderr.

``in_process=True`` runs the same server on a thread of the calling process instead (no interpreter start-up,
for fast tests); ``process`` is then ``None`` and the crash/fail-start faults are refused, as they would end
the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from harness.sim.cli import StartupError, resolve_serve
from harness.sim.server import serve

LISTEN_PREFIX = "harness-sim: listening on "


class SimStartError(RuntimeError):
    """The simulator did not become ready."""

    def __init__(self, message: str, returncode: int | None, stderr: str) -> None:
        super().__init__(f"{message} (exit status {returncode}); stderr:\n{stderr[-4000:]}")
        self.returncode = returncode
        self.stderr = stderr


@dataclass
class SimHandle:
    """A running simulator process."""

    base_url: str
    port: int
    process: subprocess.Popen[bytes] | None
    ground_truth_path: Path | None
    stdout_path: Path
    stderr_path: Path

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def stdout(self) -> str:
        return self.stdout_path.read_text(encoding="utf-8", errors="replace")


def sim_args(**cli_args: Any) -> list[str]:
    """Command-line flags for ``serve`` from keyword arguments."""
    out: list[str] = []
    for key, value in cli_args.items():
        flag = "--" + key.replace("_", "-")
        if value is None:
            continue
        if value is True:
            out.append(flag)
        elif value is False:
            out.append("--no-" + key.replace("_", "-"))
        elif isinstance(value, (list, tuple)):
            for item in value:
                out.extend([flag, str(item)])
        else:
            out.extend([flag, str(value)])
    return out


def sim_command(**cli_args: Any) -> list[str]:
    """The full command that :func:`running_sim` runs."""
    return [sys.executable, "-m", "harness.sim", "serve", *sim_args(**cli_args)]


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """SIGTERM, wait up to ``grace_s``, then SIGKILL."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=grace_s)


class _ThreadServer:
    """The server on a private event loop in a daemon thread."""

    def __init__(self, cli_args: dict[str, Any]) -> None:
        for key in ("fail_start", "crash_after_s", "crash_after_requests"):
            if cli_args.get(key) is not None:
                raise ValueError(f"{key} would end the calling process: use in_process=False")
        try:
            self._opts, self._cfg, _banner = resolve_serve(cli_args)
        except StartupError as exc:
            raise SimStartError(str(exc), 1, str(exc)) from exc
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        self._listening = threading.Event()
        self.port: int | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="harness-sim", daemon=True)

    def _main(self) -> None:
        async def run() -> None:
            self._stop = asyncio.Event()

            def listening(port: int) -> None:
                self.port = port
                self._listening.set()

            await serve(self._opts, self._cfg, stop=self._stop, on_listen=listening)

        try:
            self._loop.run_until_complete(run())
        except Exception as exc:  # reported to the caller by start()
            self.error = exc
        finally:
            self._listening.set()
            self._loop.close()

    def start(self, timeout_s: float) -> int:
        self._thread.start()
        if not self._listening.wait(timeout_s) or self.port is None:
            self.stop()
            raise SimStartError(f"in-process simulator did not listen: {self.error!r}", None, "")
        return self.port

    def stop(self) -> None:
        if self._thread.is_alive() and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)


def _wait_models(base_url: str, deadline: float, alive: Any) -> None:
    with httpx.Client(timeout=2.0) as client:
        while True:
            try:
                if client.get(base_url + "/v1/models").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            alive()
            if time.monotonic() > deadline:
                raise SimStartError("simulator not ready in time", None, "")
            time.sleep(0.05)


@contextlib.contextmanager
def running_sim(
    ready_timeout_s: float = 30.0, wait_ready: bool = True, in_process: bool = False, **cli_args: Any
) -> Iterator[SimHandle]:
    """Run ``python -m harness.sim serve`` on a free loopback port for the duration of the block."""
    tmp = tempfile.TemporaryDirectory(prefix="harness-sim-")
    tmpdir = Path(tmp.name)
    cli_args.setdefault("host", "127.0.0.1")
    cli_args["port"] = 0
    gt: Path | None
    if "ground_truth" in cli_args:
        gt = Path(cli_args["ground_truth"]) if cli_args["ground_truth"] is not None else None
    else:
        gt = tmpdir / "ground_truth.jsonl"
        cli_args["ground_truth"] = gt
    out_path, err_path = tmpdir / "stdout.log", tmpdir / "stderr.log"
    if in_process:
        out_path.touch()
        err_path.touch()
        server = _ThreadServer(cli_args)
        try:
            port = server.start(ready_timeout_s)
            base_url = f"http://127.0.0.1:{port}"

            def alive() -> None:
                if server.error is not None:
                    raise SimStartError(f"in-process simulator failed: {server.error!r}", None, "")

            if wait_ready:
                _wait_models(base_url, time.monotonic() + ready_timeout_s, alive)
            yield SimHandle(base_url, port, None, gt, out_path, err_path)
        finally:
            server.stop()
            tmp.cleanup()
        return
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with out_path.open("wb") as out_fh, err_path.open("wb") as err_fh:
        proc = subprocess.Popen(sim_command(**cli_args), stdout=out_fh, stderr=err_fh, stdin=subprocess.DEVNULL,
                                env=env)
    try:
        deadline = time.monotonic() + ready_timeout_s
        sub_port: int | None = None
        while sub_port is None:
            for line in out_path.read_text(encoding="utf-8", errors="replace").splitlines():
                if line.startswith(LISTEN_PREFIX):
                    sub_port = int(line.rsplit(":", 1)[1].strip().rstrip("/"))
            if sub_port is not None:
                break
            if proc.poll() is not None:
                raise SimStartError("simulator exited before listening", proc.returncode,
                                    err_path.read_text(errors="replace"))
            if time.monotonic() > deadline:
                raise SimStartError("simulator did not listen in time", None, err_path.read_text(errors="replace"))
            time.sleep(0.05)
        base_url = f"http://127.0.0.1:{sub_port}"

        def exited() -> None:
            if proc.poll() is not None:
                raise SimStartError("simulator exited before ready", proc.returncode,
                                    err_path.read_text(errors="replace"))

        if wait_ready:
            _wait_models(base_url, deadline, exited)
        yield SimHandle(base_url, sub_port, proc, gt, out_path, err_path)
    finally:
        stop_process(proc)
        tmp.cleanup()
