"""Pick a launcher by the engine's ``launcher`` field (``docker`` or ``process``)."""

from __future__ import annotations

from harness.launch.base import Launcher


def launcher_for(kind: str, *, allow_unpinned: bool = False) -> Launcher:
    """The launcher for ``kind``; Docker is imported lazily so hosts without it can run processes."""
    if kind == "process":
        from harness.launch.process import ProcessLauncher

        return ProcessLauncher()
    if kind == "docker":
        from harness.launch.docker import DockerLauncher

        return DockerLauncher(allow_unpinned=allow_unpinned)
    raise KeyError(f"unknown launcher {kind!r}; use docker or process")
