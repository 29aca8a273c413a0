"""Tier drills: load before, a disruption, load during and after; each phase is a journaled step with its own
records (step index < -1), so the summary computes errors, TTFT p99 and hit sources per phase from the files.

* ``cache_loss`` — delete the disk tier's contents mid-drill (only directories the harness created and marked).
* ``restart`` — restart the server on the same port keeping ``root_dir``: warm-restart hit rate, time to ready.
* ``promotion_burst`` — ``burst_requests`` requests at once after the tier has filled.
* ``storage_pressure`` — fill the tier's file system by ``fill_gib`` (a file the harness writes and removes) and/or
  throttle its reads (simulator only, via its loopback admin endpoint).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from harness.checks import disk_tier
from harness.config.drills import Drill
from harness.config.steps import StepLevel
from harness.launch.base import LaunchError
from harness.launch.process import wait_port_free
from harness.rollout import journal

if TYPE_CHECKING:
    from harness.launch.base import RunningServer
    from harness.rollout.arm_runner import ArmRunner

DRILL_STEP_BASE = -2
FILLER_NAME = "harness-storage-pressure.fill"
_CHUNK = 1 << 20


def _phase(runner: ArmRunner, server: RunningServer, scraper: Any, tokenizer: Any, drill: Drill, number: int,
           phase: str, seconds: float, *, requests: int | None = None, concurrency: int | None = None) -> str | None:
    if seconds <= 0 and not requests:
        return None
    level = StepLevel(concurrency=concurrency or drill.concurrency, duration_s=seconds or None, requests=requests)
    return runner._step(server, scraper, tokenizer, DRILL_STEP_BASE - number, f"drill-{drill.kind}-{phase}", level,
                        drill=drill.kind, drill_phase=phase)


def _event(runner: ArmRunner, drill: Drill, number: int, **fields: Any) -> None:
    journal.append(runner.ctx.run.root / "drill_events.jsonl",
                   {"arm": runner.arm.name, "kind": drill.kind, "number": number, "at_ns": time.perf_counter_ns(),
                    **fields})


def _admin(server: RunningServer, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
    try:
        resp = httpx.post(server.base_url + path, json=body, timeout=10.0, trust_env=False)
        return dict(resp.json()) if resp.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def execute(runner: ArmRunner, server: RunningServer, scraper: Any, tokenizer: Any, drill: Drill) -> None:
    """Run one drill; problems are journaled as the drill's result, never raised (except cancellation)."""
    number = sum(1 for d in runner.ctx.scenario.drills[: runner.ctx.scenario.drills.index(drill)])
    runner.ctx.say(f"[{runner.arm.name}] drill {drill.kind}")
    problem = _phase(runner, server, scraper, tokenizer, drill, number, "before", drill.before_s)
    if problem:
        _event(runner, drill, number, status="error", message=problem)
        return
    tiers = [Path(t.root_dir) for t in runner.arm.fs_tiers()]
    during_server = server
    if drill.kind == "cache_loss":
        if not tiers:
            _event(runner, drill, number, status="skipped", message="the arm has no disk tier")
            return
        removed = sum(disk_tier.clear_contents(t) for t in tiers)
        _event(runner, drill, number, action="cache_loss", removed_entries=removed)
    elif drill.kind == "restart":
        restarted = _restart(runner, server, drill, number)
        if restarted is None:
            return
        during_server = restarted
    elif drill.kind == "storage_pressure":
        _pressure_on(runner, server, drill, number, tiers)
    if drill.kind == "promotion_burst":
        problem = _phase(runner, during_server, scraper, tokenizer, drill, number, "during", 0.0,
                         requests=drill.burst_requests, concurrency=drill.burst_requests)
    else:
        problem = _phase(runner, during_server, scraper, tokenizer, drill, number, "during", drill.during_s)
    if drill.kind == "storage_pressure":
        _pressure_off(runner, during_server, drill, number, tiers)
    if problem is None:
        problem = _phase(runner, during_server, scraper, tokenizer, drill, number, "after", drill.after_s)
    _event(runner, drill, number, status="error" if problem else "done", message=problem or "")


def _restart(runner: ArmRunner, server: RunningServer, drill: Drill, number: int) -> RunningServer | None:
    spec = runner.spec
    assert spec is not None
    server.stop()
    wait_port_free(spec.host_port, timeout_s=10.0)
    t0 = time.perf_counter_ns()
    try:
        new = runner.launch(keep_disk_tier=True, host_port=spec.host_port)
    except LaunchError as exc:
        _event(runner, drill, number, status="error", message=f"restart failed: {exc.message}",
               log_tail=exc.log_tail[-20:])
        return None
    _event(runner, drill, number, action="restart", ready_s=(time.perf_counter_ns() - t0) / 1e9,
           restart_ns=t0)
    return new


def _pressure_on(runner: ArmRunner, server: RunningServer, drill: Drill, number: int, tiers: list[Path]) -> None:
    if drill.read_slowdown:
        ok = _admin(server, "/admin/faults", {"disk_read_slowdown": drill.read_slowdown}) is not None
        _event(runner, drill, number, action="read_slowdown", factor=drill.read_slowdown, applied=ok,
               note=None if ok else "the engine has no throttle endpoint (only the simulator does)")
    if drill.fill_gib and tiers:
        target = tiers[0] / FILLER_NAME
        free = os.statvfs(tiers[0]).f_bavail * os.statvfs(tiers[0]).f_frsize
        reserve = int(runner.ctx.scenario.checks.disk_reserve_gib * (1 << 30))
        want = min(int(drill.fill_gib * (1 << 30)), max(0, free - reserve))
        written = 0
        block = b"\0" * _CHUNK
        with target.open("wb") as fh:
            while written < want:
                fh.write(block[: min(_CHUNK, want - written)])
                written += min(_CHUNK, want - written)
        _event(runner, drill, number, action="fill", bytes=written, path=str(target))


def _pressure_off(runner: ArmRunner, server: RunningServer, drill: Drill, number: int, tiers: list[Path]) -> None:
    if drill.read_slowdown:
        _admin(server, "/admin/faults", {"disk_read_slowdown": 1.0})
    for tier in tiers:
        filler = tier / FILLER_NAME
        if filler.exists():
            filler.unlink()
            _event(runner, drill, number, action="fill_removed", path=str(filler))
