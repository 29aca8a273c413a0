"""Mounts every engine adapter shares: an arm's file-system offload tiers as volumes, and where the engine sees them."""

from __future__ import annotations

from harness.config.arms import Arm
from harness.engines.spec import Volume


def disk_tier_volumes(arm: Arm, *, docker: bool) -> tuple[list[Volume], dict[str, str]]:
    """Volumes for the arm's fs tiers and the map host dir -> path the engine sees (``/kv-tier/<i>`` in a
    container, the directory itself for a local process)."""
    volumes: list[Volume] = []
    disk_map: dict[str, str] = {}
    for i, tier in enumerate(arm.fs_tiers()):
        inside = f"/kv-tier/{i}" if docker else tier.root_dir
        disk_map[tier.root_dir] = inside
        volumes.append(Volume(host_path=tier.root_dir, container_path=inside, purpose="disk-tier"))
    return volumes, disk_map
