"""Pick a launcher by the engine's ``launcher`` field (``docker``, ``process`` or ``external``)."""

from __future__ import annotations

from harness.config.external import ExternalServer
from harness.launch.base import Launcher
from harness.launch.external import ExternalLauncher
from harness.launch.process import ProcessLauncher


def launcher_for(kind: str, *, allow_unpinned: bool = False, server: ExternalServer | None = None) -> Launcher:
    """The launcher for ``kind``; Docker is imported lazily so hosts without it can run processes. ``external``
    needs the arm's ``server`` section."""
    if kind == "external":
        if server is None:
            raise KeyError("the external launcher needs the arm's server section (server.base_url)")
        return ExternalLauncher(server)
    if kind == "process":
        return ProcessLauncher()
    if kind == "docker":
        from harness.launch.docker import DockerLauncher

        return DockerLauncher(allow_unpinned=allow_unpinned)
    raise KeyError(f"unknown launcher {kind!r}; use docker, process or external")
