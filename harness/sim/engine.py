"""The engine loop: drives :class:`harness.sim.scheduler.EngineCore` in (scaled) real time on asyncio.

Modelled time ``m`` and wall time relate by ``wall = t0 + m * time_scale`` (``time_scale`` 2.0 = twice as
slow as modelled). Each iteration plans a step at the current modelled time, sleeps until the step's modelled
end, applies it and wakes the requests that got a token. If the host falls behind (Python overhead, a busy
CPU), steps start when the previous one really ended: the model never runs ahead of the wall clock, so
anything a client measures is at least the modelled time. A step may start up to 2 ms (wall) in the past
to absorb timer jitter without drift; time lost beyond that is summed in ``behind_s`` (``/admin/state``).
While idle the loop sleeps until a request arrives or a promotion ends. Latency histograms are observed
here, in wall-clock seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
import traceback
from typing import Protocol

from harness.sim.request import SimRequest
from harness.sim.scheduler import EngineCore, StepPlan


class MetricsSink(Protocol):
    """What the engine loop reports to a metrics flavour."""

    def on_first_token(self, req: SimRequest, ttft_s: float, queue_s: float) -> None: ...

    def on_token(self, itl_s: float) -> None: ...

    def on_finished(self, req: SimRequest, e2e_s: float, time_scale: float) -> None: ...

    def on_step(self, plan: StepPlan, core: EngineCore, time_scale: float) -> None: ...


class TokenTimes(Protocol):
    """What :func:`observe_token` reads and stamps on a request's listener (this module's :class:`Listener`, or the
    virtual clock's)."""

    arrival_ns: int
    first_token_ns: int | None
    last_token_ns: int | None


def observe_token(req: SimRequest, listener: TokenTimes, now_ns: int, metrics: MetricsSink, scale: float) -> None:
    """One emitted token at ``now_ns``: its first-token or inter-token latency to ``metrics``, the listener's times
    advanced. The real-time loop and the virtual clock's engine observe tokens through this one function."""
    if listener.first_token_ns is None:
        listener.first_token_ns = now_ns
        queue_s = ((req.first_scheduled or req.arrival) - req.arrival) * scale
        metrics.on_first_token(req, (now_ns - listener.arrival_ns) / 1e9, max(queue_s, 0.0))
    elif listener.last_token_ns is not None:
        metrics.on_token((now_ns - listener.last_token_ns) / 1e9)
    listener.last_token_ns = now_ns


class Listener:
    """Serving-layer view of one request: wall-clock timestamps and a wake-up future."""

    __slots__ = ("arrival_ns", "done", "first_token_ns", "last_token_ns", "waiter")

    def __init__(self, arrival_ns: int) -> None:
        self.arrival_ns = arrival_ns
        self.first_token_ns: int | None = None
        self.last_token_ns: int | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.done = False

    def wake(self) -> None:
        w = self.waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def wait(self) -> None:
        """Wait for the next token or the end (call only after checking there is nothing new)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiter = fut
        try:
            await fut
        finally:
            self.waiter = None


class EngineDeadError(RuntimeError):
    """The engine loop failed; the server answers 500 from then on."""


class EngineRunner:
    """Runs the engine model against the wall clock."""

    def __init__(self, core: EngineCore, metrics: MetricsSink, time_scale: float = 1.0) -> None:
        if time_scale <= 0:
            raise ValueError("time_scale must be positive")
        self.core = core
        self.metrics = metrics
        self.scale = time_scale
        self.t0_ns = time.perf_counter_ns()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.dead: BaseException | None = None
        self.behind_s = 0.0
        self._slack = 0.002 / time_scale  # 2 ms of wall-clock jitter, in modelled seconds

    def model_now(self) -> float:
        return (time.perf_counter_ns() - self.t0_ns) / 1e9 / self.scale

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="harness-sim-engine")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def submit(self, req: SimRequest) -> None:
        if self.dead is not None:
            raise EngineDeadError(str(self.dead))
        self.core.add(req)
        self._wake.set()

    def abort(self, req: SimRequest) -> None:
        self.core.abort(req, self.model_now())
        self._wake.set()

    async def _sleep_model(self, until: float) -> None:
        delay = (until - self.model_now()) * self.scale
        if delay > 0:
            await asyncio.sleep(delay)

    async def _idle(self, until: float | None) -> None:
        self._wake.clear()
        if until is None:
            await self._wake.wait()
            return
        delay = (until - self.model_now()) * self.scale
        if delay <= 0:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), delay)

    async def _run(self) -> None:
        try:
            await self._loop()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the engine died: fail fast and loudly, like a real engine
            self.dead = exc
            traceback.print_exc(file=sys.stderr)
            print(f"harness-sim: engine loop failed: {exc!r}", file=sys.stderr, flush=True)
            for req in [*self.core.running, *self.core.waiting, *self.core.loading]:
                listener = req.listener
                if isinstance(listener, Listener):
                    listener.done = True
                    listener.wake()

    async def _loop(self) -> None:
        core = self.core
        prev_end: float | None = None
        while True:
            if not core.has_work():
                await self._idle(None)
                prev_end = None
                continue
            now = self.model_now()
            if prev_end is not None and now - prev_end <= self._slack:
                start = prev_end
            else:
                if prev_end is not None:
                    self.behind_s += (now - prev_end) * self.scale
                start = now
            plan = core.schedule(start)
            if plan is None:
                await self._idle(core.next_wakeup())
                prev_end = None
                continue
            await self._sleep_model(plan.end)
            result = core.complete(plan)
            self._dispatch(plan, result.emitted, result.finished)
            prev_end = plan.end

    def _dispatch(self, plan: StepPlan, emitted: list[SimRequest], finished: list[SimRequest]) -> None:
        now_ns = time.perf_counter_ns()
        metrics = self.metrics
        scale = self.scale
        for req in emitted:
            listener = req.listener
            if not isinstance(listener, Listener):
                continue
            observe_token(req, listener, now_ns, metrics, scale)
            listener.wake()
        for req in finished:
            listener = req.listener
            if isinstance(listener, Listener):
                listener.done = True
                metrics.on_finished(req, (now_ns - listener.arrival_ns) / 1e9, scale)
                listener.wake()
        metrics.on_step(plan, self.core, scale)
