"""Fixtures of the end-to-end tier (real dockerd, simulator image, real vLLM on the CPU); see e2e_support.py.

A missing prerequisite FAILS the test with the setup command to run; it is never skipped.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from docker import DockerClient
from e2e_support import PROCESSES_BEFORE, SIM_IMAGE, server_processes

from harness.host.docker_host import DockerUnavailable, connect


@pytest.fixture(scope="session")
def docker_client() -> Iterator[DockerClient]:
    """A client for the e2e dockerd; fails (does not skip) when none answers."""
    try:
        client = connect()
    except DockerUnavailable as exc:
        pytest.fail(f"{exc}: start one with `bash scripts/e2e/start-dockerd.sh` (or run `make test-e2e`)")
    yield client
    client.close()


@pytest.fixture(scope="session")
def sim_image(docker_client: DockerClient) -> str:
    """The simulator image, which must already be built."""
    try:
        docker_client.images.get(SIM_IMAGE)
    except Exception as exc:  # ImageNotFound or an API error: either way the setup step is missing
        pytest.fail(f"image {SIM_IMAGE} is missing ({exc}): run `bash scripts/e2e/build-sim-image.sh`")
    return SIM_IMAGE




@pytest.fixture(scope="session", autouse=True)
def _processes_before_session() -> None:
    """Remember server processes that ran before the tier started (not ours to account for)."""
    PROCESSES_BEFORE.update(server_processes())
