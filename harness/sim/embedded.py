"""The simulator on a thread of the calling process: :func:`embedded_sim` (``harness plan --calibrate``).

>>> with embedded_sim(profile="demo", kv_offloading_size=16, time_scale=0.1) as sim:
...     httpx.get(sim.base_url + "/v1/models")

Keyword arguments are ``serve``'s parameters (``kv_offloading_size=16`` is ``--kv-offloading-size 16``), parsed by the
simulator's own start-up code. The server runs on a private event loop in a daemon thread (no interpreter start-up),
binds a free loopback port, and the block is entered once ``/v1/models`` answers 200 (bounded by
``ready_timeout_s``). A ground-truth file is written to a temporary directory unless ``ground_truth`` is given. The
crash and fail-start faults are refused: they would end the caller. If the server does not come up,
:class:`SimStartError` says why.

The simulator as its own process, for tests and benchmarks, is ``tests/support/sim.py`` (``running_sim``), outside
the package; it shares :class:`SimStartError` and :func:`wait_models`.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from harness.sim.cli import StartupError, resolve_serve
from harness.sim.server import serve

_FATAL_FAULTS = ("fail_start", "crash_after_s", "crash_after_requests")


class SimStartError(RuntimeError):
    """The simulator did not become ready."""

    def __init__(self, message: str, returncode: int | None, stderr: str) -> None:
        super().__init__(f"{message} (exit status {returncode}); stderr:\n{stderr[-4000:]}")
        self.returncode = returncode
        self.stderr = stderr


@dataclass(frozen=True)
class EmbeddedSim:
    """A simulator serving on a thread of this process."""

    base_url: str
    port: int
    ground_truth_path: Path | None


class _ThreadServer:
    """The server on a private event loop in a daemon thread."""

    def __init__(self, cli_args: dict[str, Any]) -> None:
        for key in _FATAL_FAULTS:
            if cli_args.get(key) is not None:
                raise ValueError(f"{key} would end the calling process: run the simulator as its own process")
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


def wait_models(base_url: str, deadline: float, alive: Callable[[], None]) -> None:
    """Poll ``/v1/models`` until it answers 200; ``alive()`` raises if the server died; past ``deadline``: raise."""
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


def serve_args(cli_args: dict[str, Any], tmpdir: Path) -> tuple[dict[str, Any], Path | None]:
    """``cli_args`` on a free loopback port, with a ground-truth file in ``tmpdir`` unless one was given."""
    args = {"host": "127.0.0.1", **cli_args, "port": 0}
    if "ground_truth" in args:
        gt = Path(args["ground_truth"]) if args["ground_truth"] is not None else None
    else:
        gt = tmpdir / "ground_truth.jsonl"
        args["ground_truth"] = gt
    return args, gt


@contextlib.contextmanager
def embedded_sim(ready_timeout_s: float = 30.0, wait_ready: bool = True, **cli_args: Any) -> Iterator[EmbeddedSim]:
    """Serve the simulator on a thread of this process for the duration of the block."""
    with tempfile.TemporaryDirectory(prefix="harness-sim-") as tmp:
        args, gt = serve_args(cli_args, Path(tmp))
        server = _ThreadServer(args)
        try:
            port = server.start(ready_timeout_s)
            base_url = f"http://127.0.0.1:{port}"

            def alive() -> None:
                if server.error is not None:
                    raise SimStartError(f"in-process simulator failed: {server.error!r}", None, "")

            if wait_ready:
                wait_models(base_url, time.monotonic() + ready_timeout_s, alive)
            yield EmbeddedSim(base_url, port, gt)
        finally:
            server.stop()
