"""The simulator's HTTP server (aiohttp): OpenAI-compatible endpoints, metrics, admin.

Endpoints: ``GET /health`` (200 once listening; 500 if the engine loop died), ``GET /v1/models`` (503 until
``--startup-delay-s`` has passed), ``POST /v1/completions``, ``POST /v1/chat/completions``, ``POST /tokenize``,
``GET /metrics`` (Prometheus text for the vllm flavour; drained JSON iteration stats for trtllm), ``GET
/prometheus/metrics`` (trtllm), ``GET /version``, and on loopback only: ``POST /admin/faults``, ``POST
/admin/cache-loss``, ``GET /admin/state``. Every response carries ``x-harness-simulated: 1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import time
from collections.abc import Callable
from typing import Any

from aiohttp import web

from harness.host.watchdog import watch_parent
from harness.sim.admin import AdminEndpoints
from harness.sim.api import (
    DONE,
    ApiError,
    ChunkFormatter,
    ParsedRequest,
    error_response,
    full_response,
    new_request_id,
    parse_request,
)
from harness.sim.blocks import pack_tokens
from harness.sim.config import EngineConfig
from harness.sim.dev_routes import DevRoutes
from harness.sim.engine import EngineRunner, Listener
from harness.sim.faults import MALFORMED_SSE, FaultController
from harness.sim.groundtruth import GroundTruthWriter
from harness.sim.metrics_trtllm import TrtllmMetrics
from harness.sim.metrics_vllm import VllmMetrics
from harness.sim.options import ServeOptions
from harness.sim.request import ReqState, SimRequest
from harness.sim.scheduler import EngineCore
from harness.sim.tokenizer import PromptError, output_seed, tokenize_body

OWNED_BY = "harness-sim (SIMULATED)"
STALL_HOLD_S = 3600.0


class SimServer:
    """One simulated engine behind an aiohttp application."""

    def __init__(self, opts: ServeOptions, cfg: EngineConfig) -> None:
        self.opts = opts
        self.cfg = cfg
        self.core = EngineCore(cfg)
        self.metrics: VllmMetrics | TrtllmMetrics
        if opts.flavor == "trtllm":
            self.metrics = TrtllmMetrics(self.core, opts.served_names[0])
        else:
            self.metrics = VllmMetrics(self.core, opts.served_names[0], opts.kv_offloading_size_gib)
        self.runner = EngineRunner(self.core, self.metrics, opts.time_scale)
        self.faults = FaultController(opts.faults, opts.seed)
        self.apply_disk_slowdown()
        self.gt = GroundTruthWriter(opts.ground_truth) if opts.ground_truth else None
        self.ready_at = time.monotonic() + opts.startup_delay_s
        self.created = int(time.time())

    def apply_disk_slowdown(self) -> None:
        off = self.core.offload
        if off is not None and off.disk_read is not None:
            off.disk_read.slowdown = self.faults.faults.disk_read_slowdown

    # ------------------------------------------------------------------ application

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 2**20)
        app.on_response_prepare.append(self._mark_simulated)
        app.on_startup.append(self._on_startup)
        app.on_cleanup.append(self._on_cleanup)
        r = app.router
        r.add_get("/health", self.health)
        r.add_get("/version", self.version)
        r.add_get("/v1/models", self.models)
        r.add_post("/v1/completions", self.completions)
        r.add_post("/v1/chat/completions", self.chat)
        r.add_post("/tokenize", self.tokenize)
        r.add_get("/metrics", self.metrics_endpoint)
        r.add_get("/prometheus/metrics", self.prometheus_endpoint)
        admin = AdminEndpoints(core=self.core, runner=self.runner, faults=self.faults, flavor=self.opts.flavor,
                               model=self.opts.served_names[0], on_faults_changed=self.apply_disk_slowdown)
        r.add_post("/admin/faults", admin.faults)
        r.add_post("/admin/cache-loss", admin.cache_loss)
        r.add_get("/admin/state", admin.state)
        if self.opts.dev_mode and self.opts.flavor == "vllm":  # as vLLM mounts them: VLLM_SERVER_DEV_MODE=1 only
            DevRoutes(self.runner).add_to(r)
        return app

    @staticmethod
    async def _mark_simulated(_request: web.Request, response: web.StreamResponse) -> None:
        response.headers["x-harness-simulated"] = "1"

    async def _on_startup(self, _app: web.Application) -> None:
        self.runner.start()
        self.faults.arm()

    async def _on_cleanup(self, _app: web.Application) -> None:
        await self.runner.stop()
        if self.gt is not None:
            self.gt.close()

    def _ready(self) -> bool:
        return time.monotonic() >= self.ready_at

    # ------------------------------------------------------------------ simple endpoints

    async def health(self, _request: web.Request) -> web.Response:
        if self.runner.dead is not None:
            return web.Response(status=500, text="engine dead (simulated)")
        return web.Response(status=200)

    async def version(self, _request: web.Request) -> web.Response:
        return web.json_response({"version": "harness-sim (SIMULATED)"})

    async def models(self, _request: web.Request) -> web.Response:
        if not self._ready():
            return error_response(503, "model is loading (simulated start-up delay)", "ServiceUnavailableError")
        data: list[dict[str, Any]] = [{"id": name, "object": "model", "created": self.created, "owned_by": OWNED_BY,
                 "root": self.cfg.model_name, "parent": None, "max_model_len": self.cfg.max_model_len,
                 "permission": []} for name in self.opts.served_names]
        return web.json_response({"object": "list", "data": data})

    async def tokenize(self, request: web.Request) -> web.Response:
        try:
            ids = tokenize_body(await request.json())
        except (json.JSONDecodeError, PromptError, TypeError) as exc:
            return error_response(400, str(exc), "BadRequestError")
        return web.json_response({"count": len(ids), "max_model_len": self.cfg.max_model_len, "tokens": ids,
                                  "token_strs": None})

    async def metrics_endpoint(self, _request: web.Request) -> web.Response:
        if isinstance(self.metrics, TrtllmMetrics):
            return web.Response(body=self.metrics.drain_json(), content_type="application/json")
        return web.Response(body=self.metrics.render(), headers={"Content-Type": self.metrics.content_type})

    async def prometheus_endpoint(self, _request: web.Request) -> web.Response:
        if not isinstance(self.metrics, TrtllmMetrics):
            return web.Response(status=404, text="not found")
        return web.Response(body=self.metrics.render(), headers={"Content-Type": self.metrics.content_type})

    # ------------------------------------------------------------------ generation

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "completion")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "chat")

    def _record(self, rid: str, kind: str, req: SimRequest | None, status: str, arrival_ns: int,
                first_ns: int | None, first_wall_ns: int | None, sent: int, requested: int = 0) -> None:
        if self.gt is not None:
            attributed = req is not None and req.attributed
            self.gt.write({
                "request_id": rid, "kind": kind,
                "prompt_tokens": req.prompt_len if attributed and req is not None else 0,
                "requested_prompt_tokens": req.prompt_len if req is not None else requested,
                "output_tokens": sent,
                "gpu_hit_tokens": req.gpu_hit_tokens if req is not None else 0,
                "cpu_hit_tokens": req.cpu_hit_tokens if req is not None else 0,
                "disk_hit_tokens": req.disk_hit_tokens if req is not None else 0,
                "recomputed_tokens": req.recomputed_tokens if req is not None else 0,
                "arrival_ns": arrival_ns, "first_token_sent_ns": first_ns, "finished_ns": time.perf_counter_ns(),
                "first_token_sent_wall_ns": first_wall_ns,
                "preemptions": req.preemptions if req is not None else 0, "status": status,
            })
        self.faults.request_finished()

    async def _generate(self, request: web.Request, kind: str) -> web.StreamResponse:
        arrival_ns = time.perf_counter_ns()
        rid = new_request_id(kind)
        try:
            if not self._ready():
                raise ApiError(503, "model is loading (simulated start-up delay)", "ServiceUnavailableError")
            if self.runner.dead is not None:
                raise ApiError(500, "engine is dead (simulated)", "InternalServerError")
            try:
                body = await request.json()
            except json.JSONDecodeError as exc:
                raise ApiError(400, f"invalid JSON body: {exc}") from exc
            parsed = parse_request(body, kind, self.opts.served_names, self.cfg.max_model_len)
        except ApiError as exc:
            self._record(rid, kind, None, "error", arrival_ns, None, None, 0)
            return web.Response(status=exc.status, body=exc.body(), content_type="application/json")
        if self.faults.should_error():
            self._record(rid, kind, None, "error", arrival_ns, None, None, 0, len(parsed.prompt_ids))
            return error_response(500, "injected fault: internal server error (simulated)", "InternalServerError")
        model = body.get("model") or self.opts.served_names[0]
        packed = pack_tokens(parsed.prompt_ids)
        seed = output_seed(self.opts.seed, parsed.seed, parsed.prompt_ids, packed)
        req = self.core.new_request(rid, parsed.prompt_ids, parsed.max_tokens, seed, self.runner.model_now(), packed)
        listener = Listener(arrival_ns)
        req.listener = listener
        self.runner.submit(req)
        if parsed.stream:
            return await self._stream(request, req, listener, parsed, model)
        return await self._full(request, req, listener, parsed, model)

    async def _full(self, request: web.Request, req: SimRequest, listener: Listener, parsed: ParsedRequest,
                    model: str) -> web.StreamResponse:
        while not listener.done:
            await listener.wait()
        if req.state != ReqState.FINISHED:
            self._record(req.request_id, parsed.kind, req, "error", listener.arrival_ns, None, None, 0)
            return error_response(500, "engine failed (simulated)", "InternalServerError")
        body = json.dumps(full_response(parsed.kind, req.request_id, self.created, model, req.output_idx,
                                        req.prompt_len, req.cached_tokens)).encode()
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.content_length = len(body)
        status = "ok"
        first_ns = first_wall = None
        try:
            await resp.prepare(request)
            first_ns, first_wall = time.perf_counter_ns(), time.time_ns()
            await resp.write(body)
            await resp.write_eof()
        except ConnectionError:
            status = "aborted"
        self._record(req.request_id, parsed.kind, req, status, listener.arrival_ns, first_ns, first_wall,
                     req.num_output)
        return resp

    async def _stream(self, request: web.Request, req: SimRequest, listener: Listener, parsed: ParsedRequest,
                      model: str) -> web.StreamResponse:
        fmt = ChunkFormatter(parsed.kind, req.request_id, self.created, model)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8",
                                           "Cache-Control": "no-cache"})
        sent = 0
        first_ns: int | None = None
        first_wall: int | None = None
        status = "ok"
        last = req.max_tokens - 1
        faults = self.faults
        try:
            await resp.prepare(request)
            while True:
                n = req.num_output
                stall = faults.faults.stall_after_tokens
                if n > sent and (stall is None or sent < stall):
                    upto = n if stall is None else min(n, stall)
                    parts = [fmt.role_chunk()] if sent == 0 and parsed.kind == "chat" else []
                    out = req.output_idx
                    for i in range(sent, upto):
                        if faults.should_malform():
                            parts.append(MALFORMED_SSE.decode())
                        else:
                            parts.append(fmt.token(out[i], i == last))
                    if first_ns is None:  # taken as the chunk is handed to the socket (never after a reader saw it)
                        first_ns, first_wall = time.perf_counter_ns(), time.time_ns()
                    await resp.write("".join(parts).encode())
                    sent = upto
                if stall is not None and sent >= stall and sent < req.max_tokens:
                    status = await self._hold_open(request, req)
                    return resp
                if listener.done:
                    if req.state == ReqState.FINISHED and sent == req.num_output:
                        break
                    if req.state != ReqState.FINISHED:
                        status = "error"
                        return resp
                    continue
                await listener.wait()
            tail = ""
            if parsed.include_usage:
                tail = fmt.usage_chunk(req.prompt_len, req.num_output, req.cached_tokens)
            await resp.write(tail.encode() + DONE)
            await resp.write_eof()
        except ConnectionError:
            status = "aborted"
            self.runner.abort(req)
        finally:
            self._record(req.request_id, parsed.kind, req, status, listener.arrival_ns, first_ns, first_wall,
                         sent)
        return resp

    async def _hold_open(self, request: web.Request, req: SimRequest) -> str:
        """A stalled stream: send nothing more, keep the connection until the client leaves."""
        deadline = time.monotonic() + STALL_HOLD_S
        while time.monotonic() < deadline:
            transport = request.transport
            if transport is None or transport.is_closing():
                break
            await asyncio.sleep(0.2)
        if req.state not in (ReqState.FINISHED, ReqState.ABORTED):
            self.runner.abort(req)
        return "aborted"


async def serve(
    opts: ServeOptions,
    cfg: EngineConfig,
    banner: str = "",
    stop: asyncio.Event | None = None,
    on_listen: Callable[[int], None] | None = None,
) -> None:
    """Run the server until SIGTERM/SIGINT (or ``stop`` is set); prints the bound address (see ``--port 0``)."""
    server = SimServer(opts, cfg)
    runner = web.AppRunner(server.app(), access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, opts.host, opts.port)
        await site.start()
        port = int(runner.addresses[0][1])
        host = f"[{opts.host}]" if ":" in opts.host else opts.host
        if banner:
            print(banner, flush=True)
        print(f"harness-sim: listening on http://{host}:{port}", flush=True)
        if on_listen is not None:
            on_listen(port)
        loop = asyncio.get_running_loop()
        if stop is None:
            stop = asyncio.Event()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
        _stop_with_parent(loop, stop)
        await stop.wait()
    finally:
        await runner.cleanup()


def _stop_with_parent(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> None:
    """Launched by the harness (``HARNESS_PARENT`` set): shut down when that harness process dies."""
    def request_stop() -> None:
        with contextlib.suppress(RuntimeError):  # the loop already closed: the server is stopping anyway
            loop.call_soon_threadsafe(stop.set)

    watch_parent(request_stop)
