"""Admin endpoints of the simulator, answered to loopback clients only (403 otherwise).

- ``POST /admin/faults``: a JSON object with some fault fields (see :mod:`harness.sim.faults`); returns them all.
- ``POST /admin/cache-loss``: deletes the fs tier's files (its segment per namespace, :mod:`harness.sim.cache.fs`);
  returns ``{"deleted_files": n, "disk_tier": b}``.
- ``GET /admin/state``: block counts per tier, request queues, counters, faults, noise (the run factor drawn),
  ``behind_s``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from aiohttp import web

from harness.sim.api import error_response
from harness.sim.engine import EngineRunner
from harness.sim.faults import FaultController, FaultError, parse_fault_update
from harness.sim.scheduler import EngineCore

LOOPBACK = ("127.", "::1", "::ffff:127.")


def _loopback(request: web.Request) -> bool:
    remote = request.remote or ""
    return remote.startswith(LOOPBACK) or remote == "localhost"


class AdminEndpoints:
    """Handlers bound to one simulated engine: its core and runner, its fault controller, and what it serves.

    ``on_faults_changed`` runs after each fault update (the server applies a new disk-read slowdown there).
    """

    def __init__(self, *, core: EngineCore, runner: EngineRunner, faults: FaultController, flavor: str, model: str,
                 on_faults_changed: Callable[[], None]) -> None:
        self._core = core
        self._runner = runner
        self._faults = faults
        self._flavor = flavor
        self._model = model
        self._on_faults_changed = on_faults_changed

    async def faults(self, request: web.Request) -> web.Response:
        if not _loopback(request):
            return error_response(403, "admin endpoints answer loopback clients only", "ForbiddenError")
        try:
            changes = parse_fault_update(await request.json())
            self._faults.update(changes)
        except (json.JSONDecodeError, FaultError, TypeError) as exc:
            return error_response(400, str(exc), "BadRequestError")
        self._on_faults_changed()
        return web.json_response(self._faults.as_dict())

    async def cache_loss(self, request: web.Request) -> web.Response:
        if not _loopback(request):
            return error_response(403, "admin endpoints answer loopback clients only", "ForbiddenError")
        off = self._core.offload
        deleted = off.cache_loss() if off is not None else 0
        return web.json_response({"deleted_files": deleted, "disk_tier": off is not None and off.fs is not None})

    async def state(self, request: web.Request) -> web.Response:
        if not _loopback(request):
            return error_response(403, "admin endpoints answer loopback clients only", "ForbiddenError")
        core, pool, off = self._core, self._core.pool, self._core.offload
        state: dict[str, Any] = {
            "simulated": True,
            "flavor": self._flavor,
            "model": self._model,
            "gpu": {"num_blocks": pool.num_blocks, "free_blocks": pool.num_free, "cached_blocks": pool.num_cached,
                    "usage": pool.usage, "block_size": core.bs, "evictions": pool.evictions},
            "cpu": None,
            "disk": None,
            "requests": {"running": len(core.running), "waiting": len(core.waiting), "loading": len(core.loading)},
            "stats": asdict(core.stats),
            "faults": self._faults.as_dict(),
            "noise": core.noise.state() if core.noise is not None else None,
            "behind_s": self._runner.behind_s,
        }
        if off is not None:
            state["cpu"] = {"capacity_chunks": off.cpu.capacity, "chunks": len(off.cpu), "usage": off.cpu.usage,
                            "evictions": off.cpu.evictions, "chunk_blocks": off.k,
                            "policy": off.cfg.eviction_policy, "store_mode": off.cfg.store_mode}
            state["offload_stats"] = asdict(off.stats)
            if off.fs is not None:
                # "files": the chunks stored (one file each before the segment layout; kept for readers of it)
                state["disk"] = {"root_dir": str(off.fs.root_dir), "dir": str(off.fs.dir), "files": len(off.fs),
                                 "chunks": len(off.fs), "max_chunks": off.fs.max_chunks,
                                 "evictions": off.fs.evictions, "compactions": off.fs.compactions}
        return web.json_response(state)

