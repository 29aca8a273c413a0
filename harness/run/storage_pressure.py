"""The ``storage_pressure`` drill: one continuous load; ``before_s`` into it a filler file (at most ``fill_gib``, never
past the scenario's disk reserve) is written into the tier's file system and/or disk reads are throttled
(``read_slowdown``: the simulator's loopback admin endpoint only); both are undone ``during_s`` later, and on any exit.
Only a directory the harness created and marked ever receives a filler.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import httpx

from harness.host import disk_tier
from harness.launch.base import RunningServer
from harness.run.drill_load import SKIPPED, DrillAttempt, continuous_load

FILLER_NAME = "harness-storage-pressure.fill"
_CHUNK = 1 << 20


def storage_pressure(d: DrillAttempt) -> str | None:
    """The drill on its arm; returns a problem, None, or :data:`SKIPPED` (journaled why) when it cannot apply."""
    dr = d.drill
    tiers = d.tiers
    if dr.fill_gib and not tiers:
        d.event(event="skipped", message="fill_gib needs a disk tier and the arm has none")
        return SKIPPED
    try:
        return continuous_load(d, lambda: _pressure_on(d, tiers), lambda: _pressure_off(d, tiers))
    finally:
        _pressure_off(d, tiers, quiet=True)


def _admin(server: RunningServer, path: str, body: dict[str, Any]) -> bool:
    try:
        resp = httpx.post(server.base_url + path, json=body, timeout=10.0, trust_env=False)
    except httpx.HTTPError:
        return False
    return resp.status_code == 200


def _pressure_on(d: DrillAttempt, tiers: list[Path]) -> None:
    dr = d.drill
    if dr.read_slowdown:
        ok = _admin(d.server, "/admin/faults", {"disk_read_slowdown": dr.read_slowdown})
        d.event(event="action", action="read_slowdown", factor=dr.read_slowdown, applied=ok,
                note=None if ok else "the engine has no throttle endpoint (only the simulator does)")
    if dr.fill_gib and tiers:
        state, why = disk_tier.inspect(tiers[0])
        if state != "ours":
            raise disk_tier.DiskTierError(f"refusing to write a filler into {tiers[0]}: it is not the harness's "
                                          f"({state}{': ' + why if why else ''})")
        target = tiers[0] / FILLER_NAME
        st = os.statvfs(tiers[0])
        reserve = int(d.runner.ctx.scenario.checks.disk_reserve_gib * (1 << 30))
        want = max(0, min(int(dr.fill_gib * (1 << 30)), st.f_bavail * st.f_frsize - reserve))
        written = _fill(target, want)
        d.event(event="action", action="fill", bytes=written, wanted=int(dr.fill_gib * (1 << 30)), path=str(target),
                free_after=os.statvfs(tiers[0]).f_bavail * st.f_frsize)


def _fill(target: Path, want: int) -> int:
    """Write ``want`` bytes of zeros to a new file (stops early, keeping what it wrote, when the disk fills)."""
    written = 0
    block = b"\0" * _CHUNK
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        while written < want:
            try:
                written += os.write(fd, block[: min(_CHUNK, want - written)])
            except OSError:
                break
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)
    return written


def _pressure_off(d: DrillAttempt, tiers: list[Path], *, quiet: bool = False) -> None:
    if d.drill.read_slowdown and d.runner.server is not None and d.runner.server.alive():
        ok = _admin(d.server, "/admin/faults", {"disk_read_slowdown": 1.0})
        if not quiet:
            d.event(event="action", action="read_slowdown_off", applied=ok)
    for tier in tiers:
        filler = tier / FILLER_NAME
        if filler.is_file() and not filler.is_symlink():
            filler.unlink()
            d.event(event="action", action="fill_removed", path=str(filler))
