"""`harness run` of a Docker-launched simulator scenario (scenarios/sim-docker.yaml), and `harness cleanup` after a
run killed mid-arm (SIGKILL: no chance to clean up), which finds its container by label and removes it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from docker import DockerClient
from e2e_support import HARNESS, REPO, labelled, run_harness

from harness.host.labels import RUN_LABEL
from harness.launch.containers import remove_labelled_containers

pytestmark = pytest.mark.e2e
SCENARIO = REPO / "scenarios" / "sim-docker.yaml"
TIER_ROOT = "arms[2].offload.secondary_tiers[0].root_dir"  # each test's own disk tier: never a directory another
# run (or an older harness) left under /tmp, which the harness would rightly refuse as not its own


def _own_tier(tmp_path: Path) -> list[str]:
    return ["--set", f"{TIER_ROOT}={tmp_path / 'kv-tier'}"]


@pytest.mark.timeout(900)
def test_harness_run_through_the_docker_launcher(docker_client: DockerClient, sim_image: str,
                                                 tmp_path: Path) -> None:
    out = tmp_path / "results"
    proc = run_harness(["run", str(SCENARIO), "--out", str(out), *_own_tier(tmp_path)], timeout_s=600)
    assert proc.returncode in (0, 1, 3, 5), f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["exit_code"] == proc.returncode
    arms = {a["name"]: a for a in summary["arms"]}
    assert list(arms) == ["baseline", "cpu-16g", "cpu-16g-disk"]
    for name, arm in arms.items():
        assert arm["decision"] != "failed", f"{name}: {arm.get('failure')}"
        assert arm["launch"]["launcher"] == "docker"
        assert arm["launch"]["image_digest"].startswith("sha256:")
        assert sum(step["requests"] for step in arm["steps"]) > 0
        log = run_dir / "logs" / f"{name}.log"
        assert "harness-sim" in log.read_text(), f"{name}: container log not copied"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    identities = [launch["identity"] for launch in manifest["launches"]]
    assert all(i["launcher"] == "docker" and i["container_id"] for i in identities)
    # Every arm's compose file reproduces its launch and is valid for docker-compose.
    composes = sorted((run_dir / "compose").glob("*.yaml"))
    assert len(composes) == 3
    compose_bin = shutil.which("docker-compose")
    assert compose_bin, "docker-compose missing: run scripts/e2e/install-docker.sh"
    for path in composes:
        check = subprocess.run([compose_bin, "-f", str(path), "config", "-q"], capture_output=True, text=True,
                               timeout=60, check=False)
        assert check.returncode == 0, f"{path.name}: {check.stderr}"
    assert "/kv-tier/0" in (run_dir / "compose" / "cpu-16g-disk.yaml").read_text()
    assert labelled(docker_client, summary["run_id"]) == [], "containers left after the run"


def test_cleanup_after_an_interrupted_run(docker_client: DockerClient, sim_image: str, tmp_path: Path) -> None:
    before = set(labelled(docker_client))
    proc = subprocess.Popen([*HARNESS, "run", str(SCENARIO), "--out", str(tmp_path / "results"), *_own_tier(tmp_path)],
                            cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    run_id = None
    try:
        deadline = time.monotonic() + 120
        while run_id is None and time.monotonic() < deadline and proc.poll() is None:
            for container in docker_client.containers.list(filters={"label": "io.kvoffload-harness.owner=harness"}):
                if container.name not in before and container.status == "running":
                    run_id = container.labels[RUN_LABEL]
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)  # our own process group: the harness and its load generators
        proc.wait(timeout=30)
    assert run_id is not None, "the run never started a container"
    try:
        left = labelled(docker_client, run_id)
        assert len(left) == 1, f"expected the killed run's container to be left behind, found {left}"

        dry = run_harness(["cleanup", "--run-id", run_id, "--dry-run"], timeout_s=120)
        assert dry.returncode == 0, dry.stdout + dry.stderr
        assert left[0] in dry.stdout and "Would remove" in dry.stdout
        assert labelled(docker_client, run_id) == left

        done = run_harness(["cleanup", "--run-id", run_id], timeout_s=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Removed" in done.stdout and left[0] in done.stdout
        assert labelled(docker_client, run_id) == []
        again = run_harness(["cleanup", "--run-id", run_id], timeout_s=120)
        assert again.returncode == 0 and "Nothing to remove" in again.stdout, again.stdout
    finally:  # never leave the container to later tests, whatever failed above
        remove_labelled_containers(docker_client, run_id)
