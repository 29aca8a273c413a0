"""`make benchmark` on a host without a GPU runtime fails fast, says why and how to fix it, and runs nothing."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
from docker import DockerClient
from e2e_support import REPO

from harness.host.docker_host import gpu_runtime_available

pytestmark = pytest.mark.e2e


def test_benchmark_fails_fast_without_a_gpu_runtime(docker_client: DockerClient, tmp_path: Path) -> None:
    available, why = gpu_runtime_available(docker_client)
    if available:
        pytest.skip(f"this host has a GPU runtime ({why})")
    make = shutil.which("make")
    assert make, "make is missing"
    results = tmp_path / "results"
    started = time.monotonic()
    proc = subprocess.run([make, "--no-print-directory", "benchmark", f"RESULTS={results}"], cwd=REPO,
                          capture_output=True, text=True, timeout=600, check=False)
    elapsed = time.monotonic() - started
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0, output
    assert "no GPU runtime" in output and "NVIDIA Container Toolkit" in output, output
    assert elapsed < 120, f"took {elapsed:.0f} s to refuse"
    assert not results.exists() or not any(results.iterdir()), "a run started anyway"
