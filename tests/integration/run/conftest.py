"""Fixtures for rollout integration tests: short simulator scenarios written to a temp dir.

``clock="real"`` (the default) runs the simulator servers in real time 4x faster than modelled time: for what only
real time shows (processes, HTTP, signals, the simulator's own lag). ``clock="virtual"`` runs the same modelled load
on the virtual clock (``engine.sim_clock: virtual``, docs/virtual-clock.md) at ``sim_time_scale`` 1.0, every
duration four times the real-time one's: the same requests and physics, deterministic and independent of the host's
load; for tests whose point is a verdict, a rule's outcome or a statistic."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

SHORT = {
    "engine": {"sim_time_scale": 0.25},  # the simulator runs 4x faster than modelled time
    "steps": {
        "warmup": {"duration_s": 1, "concurrency": 1},
        "levels": [{"concurrency": 2, "duration_s": 3}, {"concurrency": 4, "duration_s": 3}],
        "scrape_interval_s": 0.5, "stream_idle_timeout_s": 10, "drain_timeout_s": 3,
    },
}
REAL_SCALE = 0.25
# SHORT's modelled load on the virtual clock: no time scale, every duration (and limit) in modelled seconds
VIRTUAL = {
    "engine": {"sim_clock": "virtual", "sim_time_scale": 1.0},
    "steps": {
        "warmup": {"duration_s": 1 / REAL_SCALE, "concurrency": 1},
        "levels": [{"concurrency": 2, "duration_s": 3 / REAL_SCALE}, {"concurrency": 4, "duration_s": 3 / REAL_SCALE}],
        "scrape_interval_s": 0.5 / REAL_SCALE, "stream_idle_timeout_s": 10 / REAL_SCALE,
        "drain_timeout_s": 3 / REAL_SCALE,
    },
}


def _merge(base: dict, over: dict) -> dict:  # type: ignore[type-arg]
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


@pytest.fixture
def short_scenario(tmp_path: Path) -> Callable[..., Path]:
    """Write the demo scenario shortened (and optionally changed) to a temp file; returns its path."""

    def make(name: str = "short", drop_drills: bool = True, clock: str = "real", **over: object) -> Path:
        data = yaml.safe_load(Path("scenarios/demo-sim.yaml").read_text())
        data["engine"].pop("sim_noise", None)  # deterministic timings unless a test asks for noise
        data["rules"]["noise_floor"] = {"rerun_baseline": False}  # no A/A re-run unless a test asks for it
        data = _merge(data, {"real": SHORT, "virtual": VIRTUAL}[clock])
        data = _merge(data, over)  # type: ignore[arg-type]
        if drop_drills:
            data.pop("drills", None)
        tier = tmp_path / "kv-tier"
        for arm in data["arms"]:
            for t in arm.get("offload", {}).get("secondary_tiers", []):
                t["root_dir"] = str(tier)
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return make
