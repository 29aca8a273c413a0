"""Helpers for the virtual clock's rollout tests."""

from __future__ import annotations

from typing import Any

WALL_KEYS = {"run_id", "started_at", "finished_at", "recorded_at", "host", "versions", "files"}


def without_wall_clock(data: Any) -> Any:
    """A summary without its wall-clock and host fields (what differs between two runs of one scenario)."""
    if isinstance(data, dict):
        return {k: without_wall_clock(v) for k, v in data.items() if k not in WALL_KEYS and "wall" not in k}
    if isinstance(data, list):
        return [without_wall_clock(v) for v in data]
    return data
