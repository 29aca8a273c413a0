"""vLLM's development routes, served as vLLM 0.32 serves them: only when the server's environment has
``VLLM_SERVER_DEV_MODE=1`` (read at start-up, ``ServeOptions.dev_mode``), and only by the vLLM flavour; otherwise
the path is not found (404).

- ``POST /reset_prefix_cache?reset_running_requests=&reset_external=`` (``vllm/entrypoints/serve/dev/cache/
  api_router.py``): forgets the GPU prefix cache and, with ``reset_external=true``, the offload tiers, as
  :meth:`harness.sim.scheduler.EngineCore.reset_prefix_cache` models it (the fs tier keeps its files, as vLLM 0.32's
  tiering manager keeps its secondary tiers). Answers ``{"success": bool}``: false while a block is still held (a
  running request, a store or load in flight). ``reset_running_requests=true`` with requests in flight (vLLM would
  preempt them) is not modelled: 501. A query value that is not a boolean: 400, as vLLM 0.32 answers (its handler
  turns FastAPI's validation error into a 400).
"""

from __future__ import annotations

from aiohttp import web

from harness.sim.api import error_response
from harness.sim.engine import EngineRunner

_TRUE = {"1", "true", "on", "yes", "t", "y"}
_FALSE = {"0", "false", "off", "no", "f", "n"}


def query_bool(request: web.Request, name: str) -> bool | None:
    """A boolean query parameter as FastAPI reads one (default False); None: not a boolean."""
    raw = request.query.get(name)
    if raw is None:
        return False
    value = raw.strip().lower()
    return True if value in _TRUE else (False if value in _FALSE else None)


class DevRoutes:
    """The development routes of one simulated engine."""

    def __init__(self, runner: EngineRunner) -> None:
        self._runner = runner

    def add_to(self, router: web.UrlDispatcher) -> None:
        router.add_post("/reset_prefix_cache", self.reset_prefix_cache)

    async def reset_prefix_cache(self, request: web.Request) -> web.Response:
        running = query_bool(request, "reset_running_requests")
        external = query_bool(request, "reset_external")
        if running is None or external is None:
            return error_response(400, "reset_running_requests and reset_external must be booleans",
                                  "Bad Request")
        core = self._runner.core
        if running and core.has_work():
            return error_response(501, "reset_running_requests with requests in flight is not modelled by the "
                                  "simulator", "NotImplementedError")
        success = core.reset_prefix_cache(self._runner.model_now(), reset_external=external)
        return web.json_response({"success": success})
