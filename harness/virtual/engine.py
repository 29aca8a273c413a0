"""The simulated engine inside the harness process: the simulator's own engine core, metrics and request handling,
stepped by the virtual clock's event queue instead of asyncio and the wall clock.

What is shared with ``harness sim serve`` (so the same arm models the same engine on either clock): the flags
(the arm's launch spec is parsed by the ``serve`` command's own parser and resolved by
:func:`harness.sim.cli.resolve_serve`), the engine core (:class:`harness.sim.scheduler.EngineCore`), the request
parsing and tokenisation (:func:`harness.sim.api.parse_request`, :mod:`harness.sim.tokenizer`: chat template words,
output seeds), the ``/tokenize`` answer and the metrics flavours (:mod:`harness.sim.metrics_vllm`,
:mod:`harness.sim.metrics_trtllm`: the exposition text the scraper stores). What differs: the disk tier is
:class:`~harness.virtual.disk.MemoryFsTier`; response ids are numbered from a prefix derived from the arm's name
(not random); there is no ground-truth file and no fault injection (refused up front, :mod:`harness.virtual.checks`).

The engine loop is the one of :class:`harness.sim.engine.EngineRunner` with the host's lag taken out: a step is
planned when work arrives at an idle engine (after every arrival at that instant), the next one at the previous
one's end, and an engine with nothing runnable waits for its next wake-up (a load or a store ending) or the next
arrival. Latency histograms are observed in virtual seconds. Virtual time relates to modelled time as wall time
does on the real clock: ``virtual = start + modelled * time_scale``. A request's tokens reach its listener at the end
of the step that made them; a finished request's listener is told in a client event at that instant, so its next
request joins a later step, as a real client's does.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import shutil
import tempfile
from typing import Any, Protocol

import typer

from harness.engines.spec import LaunchSpec
from harness.sim.api import ApiError, full_response, parse_request
from harness.sim.blocks import pack_tokens
from harness.sim.cache.probe import FsProbes
from harness.sim.cli import StartupError, UsageError, resolve_serve, sim_app
from harness.sim.config import ConfigError, EngineConfig
from harness.sim.engine import observe_token
from harness.sim.metrics_trtllm import TrtllmMetrics
from harness.sim.metrics_vllm import VllmMetrics
from harness.sim.options import ServeOptions
from harness.sim.request import ReqState, SimRequest
from harness.sim.scheduler import EngineCore, StepPlan
from harness.sim.tokenizer import PromptError, output_seed, tokenize_body
from harness.virtual.clock import PRIO_CLIENT, PRIO_ENGINE, EventQueue
from harness.virtual.disk import MemoryFsTier, VirtualDisk

_LAUNCH_ONLY = {"host", "port", "ground_truth"}  # where a served simulator listens and writes: nothing here


class EngineStartError(Exception):
    """The simulator refuses to start with the arm's flags; ``message`` is what it would print."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Listener(Protocol):
    """Who waits for one request: told of each token, and once when the request has ended."""

    arrival_ns: int
    first_token_ns: int | None
    last_token_ns: int | None

    def token(self, now_ns: int) -> None:
        """One output token reached the client (its chunk arrives now)."""

    def ended(self, req: SimRequest) -> None:
        """The request finished, or the engine died under it (a client event, after the engine's step)."""


def serve_params(args: list[str]) -> dict[str, Any]:
    """The ``serve`` command's parameters for ``args``, parsed by its own (typer/click) parser."""
    group: Any = typer.main.get_command(sim_app)  # typer's own click: no public type to check against
    command = group.commands["serve"]
    try:
        ctx = command.make_context("serve", list(args))
    except Exception as exc:  # click's usage errors (an unknown flag, a value of the wrong type)
        text = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        raise EngineStartError(f"harness-sim: error: {text}") from None
    params = {k: v for k, v in ctx.params.items() if k not in _LAUNCH_ONLY}
    if params.get("served_model_name") is not None:
        params["served_model_name"] = list(params["served_model_name"])
    return params


def resolve_spec(spec: LaunchSpec) -> tuple[ServeOptions, EngineConfig, str]:
    """Server options, engine configuration and start-up banner of an arm's simulator launch spec."""
    try:
        return resolve_serve(serve_params(list(spec.args)))
    except (UsageError, StartupError, ConfigError) as exc:
        raise EngineStartError(str(exc)) from None


def build_core(cfg: EngineConfig, disk: VirtualDisk) -> EngineCore:
    """The engine core for ``cfg``, its disk tier (if any) in ``disk``. The core is built on a private empty
    directory (the simulator's fs tier creates its directory when constructed), which is then replaced by the memory
    tier and removed: the tier's configured ``root_dir`` is never touched."""
    off = cfg.offload
    if off is None or off.fs is None:
        return EngineCore(cfg)
    scratch = tempfile.mkdtemp(prefix="harness-virtual-fs-")
    try:
        core = EngineCore(dataclasses.replace(cfg, offload=dataclasses.replace(
            off, fs=dataclasses.replace(off.fs, root_dir=scratch))))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    manager = core.offload
    assert manager is not None and manager.fs is not None and manager.probes is not None
    real = manager.fs
    manager.fs = MemoryFsTier(disk, off.fs.root_dir, core.root, real.chunk_tokens, real.chunk_bytes, off.fs.max_bytes)
    manager.probes = FsProbes(manager.fs.contains)  # the existence checks look at the memory tier's files
    return core


def id_prefix(seed_text: str) -> str:
    """Eight hex digits for response ids, derived from ``seed_text`` (the simulator takes them from os.urandom)."""
    return hashlib.blake2b(seed_text.encode("utf-8"), digest_size=4).hexdigest()


class VirtualEngine:
    """One start of the simulated engine on the virtual clock."""

    def __init__(self, spec: LaunchSpec, queue: EventQueue, disk: VirtualDisk, ids: str) -> None:
        self.opts, self.cfg, self.banner = resolve_spec(spec)
        self.spec = spec
        self.queue = queue
        self.core = build_core(self.cfg, disk)
        off = self.core.offload
        if off is not None and off.disk_read is not None:
            off.disk_read.slowdown = self.opts.faults.disk_read_slowdown
        self.metrics: VllmMetrics | TrtllmMetrics
        if self.opts.flavor == "trtllm":
            self.metrics = TrtllmMetrics(self.core, self.opts.served_names[0])
        else:
            self.metrics = VllmMetrics(self.core, self.opts.served_names[0], self.opts.kv_offloading_size_gib)
        self.scale = self.opts.time_scale
        self.start_ns = queue.clock.mono_ns()
        self.plan: StepPlan | None = None
        self.dead: str | None = None
        self.stopped = False
        self._kick_token = 0
        self._kick_at: float | None = None
        self._ids = itertools.count(1)
        self._id_prefix = ids

    # ------------------------------------------------------------------ clocks

    def model_at(self, mono_ns: int) -> float:
        """Modelled seconds since the start at virtual time ``mono_ns``."""
        return (mono_ns - self.start_ns) / 1e9 / self.scale

    def ns_at(self, model_s: float) -> int:
        """The virtual time of modelled second ``model_s``."""
        return self.start_ns + round(model_s * self.scale * 1e9)

    @property
    def alive(self) -> bool:
        """Running: started, not stopped, its loop not failed."""
        return not self.stopped and self.dead is None

    # ------------------------------------------------------------------ requests

    def new_id(self, kind: str) -> str:
        """``chatcmpl-sim-<hex>`` / ``cmpl-sim-<hex>``, as the simulator names its responses."""
        return f"{'chatcmpl-sim-' if kind == 'chat' else 'cmpl-sim-'}{self._id_prefix}{next(self._ids):08x}"

    def submit(self, body: dict[str, Any], kind: str, listener: Listener) -> SimRequest:
        """Admit one generation request now (raises :class:`~harness.sim.api.ApiError` as the server answers it)."""
        if self.dead is not None:
            raise ApiError(500, "engine is dead (simulated)", "InternalServerError")
        parsed = parse_request(body, kind, self.opts.served_names, self.cfg.max_model_len)
        now_ns = self.queue.clock.mono_ns()
        packed = pack_tokens(parsed.prompt_ids)
        seed = output_seed(self.opts.seed, parsed.seed, parsed.prompt_ids, packed)
        req = self.core.new_request(self.new_id(kind), parsed.prompt_ids, parsed.max_tokens, seed,
                                    self.model_at(now_ns), packed)
        req.listener = listener
        self.core.add(req)
        self._wake(now_ns)
        return req

    def abort(self, req: SimRequest) -> None:
        """The client went away: the engine drops the request (an idle engine looks at its queue again now)."""
        if not self.alive:
            return
        now_ns = self.queue.clock.mono_ns()
        self.core.abort(req, self.model_at(now_ns))
        self._wake(now_ns)

    def tokenize(self, body: Any) -> tuple[int, dict[str, Any]]:
        """``POST /tokenize``: (status, answer), as the server answers it."""
        try:
            ids = tokenize_body(body)
        except (PromptError, TypeError) as exc:
            return 400, {"error": {"message": str(exc), "type": "BadRequestError", "param": None, "code": 400}}
        return 200, {"count": len(ids), "max_model_len": self.cfg.max_model_len, "tokens": ids, "token_strs": None}

    def complete_now(self, body: dict[str, Any], kind: str, timeout_s: float) -> tuple[int, dict[str, Any]]:
        """A non-streamed request, run on the virtual clock until it has ended (at most ``timeout_s`` virtual
        seconds: then the client gives up, as a real one does): (status, answer)."""
        start = self.queue.clock.mono_ns()
        holder = _Collector(start)
        try:
            req = self.submit(body, kind, holder)
        except ApiError as exc:
            return exc.status, {"error": {"message": exc.message, "type": exc.err_type, "param": None,
                                          "code": exc.status}}
        if not self.queue.run_until(lambda: holder.done, limit_ns=start + int(timeout_s * 1e9)):
            self.abort(req)
            return 504, {"error": {"message": f"no answer within {timeout_s:g} s", "type": "Timeout",
                                   "param": None, "code": 504}}
        if req.state != ReqState.FINISHED:
            return 500, {"error": {"message": "engine failed (simulated)", "type": "InternalServerError",
                                   "param": None, "code": 500}}
        model = str(body.get("model") or self.opts.served_names[0])
        return 200, full_response(kind, req.request_id, 0, model, req.output_idx, req.prompt_len, req.cached_tokens)

    # ------------------------------------------------------------------ metrics

    def exposition(self, path: str) -> tuple[int, str]:
        """What ``GET path`` answers (the metrics endpoints of the served simulator): (status, body)."""
        if path == "/metrics":
            if isinstance(self.metrics, TrtllmMetrics):
                return 200, self.metrics.drain_json().decode("utf-8")
            return 200, self.metrics.render().decode("utf-8")
        if path == "/prometheus/metrics" and isinstance(self.metrics, TrtllmMetrics):
            return 200, self.metrics.render().decode("utf-8")
        return 404, "not found"

    # ------------------------------------------------------------------ the engine loop

    def stop(self) -> None:
        """Stop the engine: queued events of this start do nothing any more."""
        self.stopped = True
        self._kick_token += 1

    def _wake(self, now_ns: int) -> None:
        """Work arrived (or an abort freed room): an idle engine plans a step now, after every client event of this
        instant (a pending wake-up at a later time is replaced)."""
        if self.plan is not None or not self.alive:
            return
        now = self.model_at(now_ns)
        if self._kick_at is not None and self._kick_at <= now:
            return
        self._push_kick(now)

    def _push_kick(self, model_s: float) -> None:
        self._kick_token += 1
        self._kick_at = model_s
        self.queue.at(self.ns_at(model_s), PRIO_ENGINE, self._kick, model_s, self._kick_token)

    def _kick(self, model_s: float, token: int) -> None:
        if token != self._kick_token or self.plan is not None or not self.alive:
            return
        self._kick_at = None
        self._schedule(model_s)

    def _schedule(self, start: float) -> None:
        core = self.core
        if not core.has_work():
            return
        try:
            plan = core.schedule(start)
        except Exception as exc:  # the engine died: fail like the served simulator does
            self._die(exc)
            return
        if plan is None:
            wake = core.next_wakeup()
            if wake is not None:
                self._push_kick(max(wake, start))
            return
        self.plan = plan
        self.queue.at(self.ns_at(plan.end), PRIO_ENGINE, self._end_step, plan)

    def _end_step(self, plan: StepPlan) -> None:
        if plan is not self.plan or not self.alive:
            return
        self.plan = None
        try:
            result = self.core.complete(plan)
        except Exception as exc:
            self._die(exc)
            return
        self._dispatch(plan, result.emitted, result.finished)
        self._schedule(plan.end)  # the next step starts where this one ended

    def _dispatch(self, plan: StepPlan, emitted: list[SimRequest], finished: list[SimRequest]) -> None:
        """:meth:`harness.sim.engine.EngineRunner._dispatch` on the virtual clock."""
        now_ns = self.queue.clock.mono_ns()
        metrics, scale = self.metrics, self.scale
        for req in emitted:
            listener = req.listener
            if listener is None:
                continue
            observe_token(req, listener, now_ns, metrics, scale)
            listener.token(now_ns)
        for req in finished:
            listener = req.listener
            if listener is not None:
                metrics.on_finished(req, (now_ns - listener.arrival_ns) / 1e9, scale)
                self.queue.at(now_ns, PRIO_CLIENT, listener.ended, req)
        metrics.on_step(plan, self.core, scale)

    def _die(self, exc: Exception) -> None:
        self.dead = f"engine loop failed: {exc!r}"
        self.plan = None
        now_ns = self.queue.clock.mono_ns()
        for req in [*self.core.running, *self.core.waiting, *self.core.loading]:
            if req.listener is not None:
                self.queue.at(now_ns, PRIO_CLIENT, req.listener.ended, req)


class _Collector:
    """The listener of a non-streamed request."""

    def __init__(self, arrival_ns: int) -> None:
        self.arrival_ns = arrival_ns
        self.first_token_ns: int | None = None
        self.last_token_ns: int | None = None
        self.done = False

    def token(self, now_ns: int) -> None:
        return

    def ended(self, req: SimRequest) -> None:
        self.done = True

