"""Fixtures for the virtual clock's rollout tests: the demo scenario shortened (and changed) in a temp dir."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

DEMO = Path(__file__).resolve().parents[3] / "scenarios" / "demo-sim.yaml"


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


@pytest.fixture
def virtual_scenario(tmp_path: Path) -> Callable[..., Path]:
    """Write the demo scenario, with ``over`` merged in and its disk tier in the temp dir; returns its path."""

    def make(name: str = "virtual", **over: Any) -> Path:
        data = _merge(yaml.safe_load(DEMO.read_text()), over)
        for arm in data["arms"]:
            for tier in arm.get("offload", {}).get("secondary_tiers", []):
                tier["root_dir"] = str(tmp_path / "kv-tier")
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    return make
