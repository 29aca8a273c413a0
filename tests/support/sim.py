"""Start the simulator for tests and benchmarks, without pytest: :func:`running_sim`.

>>> with running_sim(profile="demo", kv_offloading_size=16, time_scale=0.1) as sim:
...     httpx.get(sim.base_url + "/v1/models")

Keyword arguments become ``serve`` flags (``kv_offloading_size=16`` -> ``--kv-offloading-size 16``; ``True`` ->
``--flag``; ``False`` -> ``--no-flag``; ``None`` -> omitted; a list repeats the flag). The server binds a free
loopback port (``--port 0``), the helper reads the port from its stdout, waits (bounded) for ``/v1/models`` to
answer 200, and on exit terminates the process (SIGTERM, then SIGKILL after a grace period). A ground-truth
file is written to a temporary directory unless ``ground_truth`` is given. If the process exits before it is
ready, :class:`SimStartError` carries its exit status and stderr.

``in_process=True`` runs the same server on a thread of the calling process instead
(:func:`harness.sim.embedded.embedded_sim`, what ``harness plan --calibrate`` uses; no interpreter start-up, for fast
tests); ``process`` is then ``None`` and the crash/fail-start faults are refused, as they would end the caller.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.sim.embedded import SimStartError, embedded_sim, serve_args, wait_models

__all__ = ["LISTEN_PREFIX", "SimHandle", "SimStartError", "running_sim", "sim_args", "sim_command", "stop_process"]

LISTEN_PREFIX = "harness-sim: listening on "


@dataclass
class SimHandle:
    """A running simulator (a process, or a thread of this one: ``process`` None)."""

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


@contextlib.contextmanager
def running_sim(
    ready_timeout_s: float = 30.0, wait_ready: bool = True, in_process: bool = False, **cli_args: Any
) -> Iterator[SimHandle]:
    """Run ``python -m harness.sim serve`` on a free loopback port for the duration of the block."""
    if in_process:
        with tempfile.TemporaryDirectory(prefix="harness-sim-logs-") as logs, \
                embedded_sim(ready_timeout_s, wait_ready, **cli_args) as sim:
            out_path, err_path = Path(logs) / "stdout.log", Path(logs) / "stderr.log"
            out_path.touch()
            err_path.touch()
            yield SimHandle(sim.base_url, sim.port, None, sim.ground_truth_path, out_path, err_path)
        return
    tmp = tempfile.TemporaryDirectory(prefix="harness-sim-")
    tmpdir = Path(tmp.name)
    args, gt = serve_args(cli_args, tmpdir)
    out_path, err_path = tmpdir / "stdout.log", tmpdir / "stderr.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with out_path.open("wb") as out_fh, err_path.open("wb") as err_fh:
        proc = subprocess.Popen(sim_command(**args), stdout=out_fh, stderr=err_fh, stdin=subprocess.DEVNULL,
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
            wait_models(base_url, deadline, exited)
        yield SimHandle(base_url, sub_port, proc, gt, out_path, err_path)
    finally:
        stop_process(proc)
        tmp.cleanup()
