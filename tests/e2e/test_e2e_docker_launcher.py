"""The Docker launcher against a real dockerd and the simulator image: the code path of the vLLM and TensorRT-LLM
containers (labels, loopback ports, init, logs, readiness, stop and remove), a server that dies at start-up, a
server that ignores SIGTERM, and a GPU request on a host without the NVIDIA runtime."""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from docker import DockerClient
from docker.errors import NotFound
from e2e_support import labelled

from harness.engines.spec import ConfigFile, LaunchSpec, Volume
from harness.host.docker_host import gpu_runtime_available
from harness.host.labels import ARM_LABEL, DISK_TIER_MARKER, OWNER_LABEL, RUN_LABEL
from harness.launch.base import LaunchContext, LaunchError
from harness.launch.docker import DockerLauncher
from harness.launch.readiness import wait_ready

pytestmark = pytest.mark.e2e
SECRET = "hf_e2e_" + secrets.token_hex(8)


def sim_spec(image: str, **overrides: Any) -> LaunchSpec:
    data: dict[str, Any] = {
        "engine": "sim", "arm": "baseline", "image": image,
        # A shell in front of the simulator prints the secret, so redaction of real container logs is checked.
        "entrypoint": ["sh", "-c", 'echo "token is $HF_TOKEN"; exec python3 -m harness.sim serve "$@"', "sim"],
        "args": ["--host", "0.0.0.0", "--port", "8000", "--served-model-name", "e2e-sim", "--time-scale", "0.1"],
        "env": {"HF_TOKEN": SECRET}, "container_port": 8000, "host_port": 0, "served_model_name": "e2e-sim",
        "readiness_timeout_s": 60,
    }
    data.update(overrides)
    return LaunchSpec.model_validate(data)


def context(tmp_path: Path, arm: str = "baseline") -> LaunchContext:
    run_id = f"e2e-{secrets.token_hex(4)}"
    return LaunchContext(run_id=run_id, log_path=tmp_path / "logs" / f"{arm}.log", work_dir=tmp_path / "work",
                         secrets=[SECRET])


def test_sim_container_lifecycle(docker_client: DockerClient, sim_image: str, tmp_path: Path) -> None:
    ctx = context(tmp_path)
    tier = tmp_path / "kv-tier"
    spec = sim_spec(sim_image, volumes=[Volume(host_path=str(tier), container_path="/kv-tier/0",
                                               purpose="disk-tier")],
                    config_files=[ConfigFile(name="note.yaml", container_path="/harness/note.yaml", content="a: 1\n")])
    server = DockerLauncher(docker_client).start(spec, ctx)
    try:
        waited = wait_ready(server, 60)
        assert waited < 60
        container = docker_client.containers.get(server.identity()["container_id"])
        labels = container.labels
        assert labels[RUN_LABEL] == ctx.run_id and labels[ARM_LABEL] == "baseline" and labels[OWNER_LABEL] == "harness"
        host_config = container.attrs["HostConfig"]
        assert host_config["Init"] is True
        bindings = host_config["PortBindings"]["8000/tcp"]
        assert [b["HostIp"] for b in bindings] == ["127.0.0.1"]
        assert server.base_url.startswith("http://127.0.0.1:")
        mounts = {m["Destination"]: m for m in container.attrs["Mounts"]}
        assert mounts["/kv-tier/0"]["Source"] == str(tier) and mounts["/kv-tier/0"]["RW"] is True
        assert mounts["/harness/note.yaml"]["RW"] is False
        assert (tier / DISK_TIER_MARKER).exists()
        body = httpx.post(f"{server.base_url}/v1/chat/completions", timeout=30, json={
            "model": "e2e-sim", "max_tokens": 4, "messages": [{"role": "user", "content": "hello " * 50}]}).json()
        assert body["choices"][0]["message"]["content"]
        metrics = httpx.get(f"{server.base_url}/metrics", timeout=10).text
        assert "vllm:prefix_cache_queries_total" in metrics
        identity = server.identity()
        assert identity["image_digest"].startswith("sha256:") and SECRET not in repr(identity)
        assert server.alive() and server.exit_description() is None
    finally:
        started = time.monotonic()
        server.stop(timeout_s=10)
        stop_s = time.monotonic() - started
    assert stop_s < 8, f"stop took {stop_s:.1f} s: SIGTERM did not reach the server (init?)"
    with pytest.raises(NotFound):
        docker_client.containers.get(identity["container_id"])
    server.stop()  # idempotent
    log = ctx.log_path.read_text()
    assert "token is ***" in log and SECRET not in log
    assert "harness-sim" in log
    assert labelled(docker_client, ctx.run_id) == []


def test_server_that_dies_at_startup_is_reported_with_its_log(docker_client: DockerClient, sim_image: str,
                                                              tmp_path: Path) -> None:
    ctx = context(tmp_path)
    spec = sim_spec(sim_image, args=["--host", "0.0.0.0", "--port", "8000", "--profile", "no-such-profile"])
    server = DockerLauncher(docker_client).start(spec, ctx)
    try:
        with pytest.raises(LaunchError) as err:
            wait_ready(server, 60)
        assert "exit code" in err.value.message
        assert any("no-such-profile" in line for line in err.value.log_tail), err.value.log_tail
    finally:
        server.stop()
    assert labelled(docker_client, ctx.run_id) == []
    assert "no-such-profile" in ctx.log_path.read_text()


def test_stop_is_bounded_when_the_server_ignores_sigterm(docker_client: DockerClient, sim_image: str,
                                                         tmp_path: Path) -> None:
    ctx = context(tmp_path)
    spec = sim_spec(sim_image, entrypoint=["sh", "-c", "trap '' TERM; echo stubborn; while :; do sleep 1; done"],
                    args=[])
    server = DockerLauncher(docker_client).start(spec, ctx)
    deadline = time.monotonic() + 20
    while "stubborn" not in "".join(server.log_tail()) and time.monotonic() < deadline:
        time.sleep(0.1)
    started = time.monotonic()
    server.stop(timeout_s=2)
    elapsed = time.monotonic() - started
    assert 1.5 < elapsed < 15, f"stop took {elapsed:.1f} s"
    assert labelled(docker_client, ctx.run_id) == []
    assert "stubborn" in ctx.log_path.read_text()


def test_gpu_request_without_nvidia_runtime(docker_client: DockerClient, sim_image: str, tmp_path: Path) -> None:
    available, why = gpu_runtime_available(docker_client)
    if available:
        pytest.skip(f"this host has a GPU runtime ({why}); the failure path needs one without")
    assert "NVIDIA Container Toolkit" in why
    ctx = context(tmp_path)
    with pytest.raises(LaunchError) as err:
        DockerLauncher(docker_client).start(sim_spec(sim_image, gpus="all"), ctx)
    message = err.value.message
    assert "no NVIDIA container runtime on this host" in message
    assert 'could not select device driver "" with capabilities: [[gpu]]' in message
    # Docker leaves such a container in Created state; the launcher must have removed it.
    assert labelled(docker_client, ctx.run_id) == []
