"""`docker-compose config -q` on the shipped compose files and on rendered per-arm files (compose v1 is what
Debian ships; `docker compose` v2 is checked too where it exists)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from e2e_support import REPO

from harness.config.loader import load_scenario
from harness.engines.registry import build_launch_spec
from harness.launch.compose import write_compose

pytestmark = pytest.mark.e2e
FILES = sorted([*(REPO / "compose").glob("*.yaml"), REPO / "compose" / "monitoring" / "docker-compose.yaml"])
SCENARIOS = ["vllm-cpu-pilot.yaml", "vllm-tiered.yaml", "trtllm-host.yaml", "sim-docker.yaml"]


def compose_commands() -> list[list[str]]:
    commands = []
    v1 = shutil.which("docker-compose")
    assert v1, "docker-compose missing: run scripts/e2e/install-docker.sh"
    commands.append([v1])
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True, timeout=30,
                                 check=False).returncode == 0:
        commands.append([docker, "compose"])
    return commands


def config_ok(command: list[str], path: Path) -> None:
    proc = subprocess.run([*command, "-f", str(path), "config", "-q"], capture_output=True, text=True, timeout=60,
                          check=False, cwd=path.parent)
    assert proc.returncode == 0, f"{' '.join(command)} config {path}: {proc.stderr}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(REPO / "compose")))
def test_shipped_compose_files_are_valid(path: Path) -> None:
    assert len(FILES) == 5
    for command in compose_commands():
        config_ok(command, path)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rendered_compose_files_are_valid(scenario: str, tmp_path: Path) -> None:
    scen = load_scenario(REPO / "scenarios" / scenario)
    for arm in scen.arms:
        spec = build_launch_spec(scen.engine_for(arm), arm, host_port=18000)
        path = write_compose(spec, f"e2e-{arm.name}", tmp_path / arm.name)
        for command in compose_commands():
            config_ok(command, path)
