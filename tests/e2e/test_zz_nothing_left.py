"""Runs last in the e2e tier: nothing the tests started is left — no labelled container (any state), no vLLM or
simulator server process started from this
checkout (processes that already ran when the session began are not counted)."""

from __future__ import annotations

import pytest
from docker import DockerClient
from e2e_support import PROCESSES_BEFORE, labelled, server_processes

pytestmark = pytest.mark.e2e


def test_no_labelled_containers_left(docker_client: DockerClient) -> None:
    assert labelled(docker_client) == []


def test_no_server_processes_left() -> None:
    new = {pid: line for pid, line in server_processes().items() if pid not in PROCESSES_BEFORE}
    assert new == {}
