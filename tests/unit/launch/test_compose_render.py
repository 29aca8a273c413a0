"""Compose rendering of one arm: structure, loopback ports, GPU reservation, env names without values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.engines.spec import ConfigFile, LaunchSpec, Volume
from harness.launch.compose import render_compose, write_compose


def make_spec(**overrides: Any) -> LaunchSpec:
    data: dict[str, Any] = {
        "engine": "vllm", "arm": "cpu-tier", "image": "vllm/vllm-openai:v0.32.0",
        "entrypoint": ["python3", "-m", "vllm.entrypoints.openai.api_server"],
        "args": ["--model", "m", "--kv-transfer-config", '{"kv_connector":"OffloadingConnector"}', "--x", "$HOME"],
        "env": {"HF_TOKEN": "hf_supersecret", "VLLM_LOGGING_LEVEL": "DEBUG"},
        "container_port": 8000, "host_port": 18001, "served_model_name": "m", "gpus": "all", "shm_size": "16g",
        "readiness_timeout_s": 900,
    }
    data.update(overrides)
    return LaunchSpec.model_validate(data)


def service(text: str) -> dict[str, Any]:
    doc = yaml.safe_load(text)
    assert "version" not in doc  # valid for compose v1 (1.27+) and v2 without a version key
    assert list(doc["services"]) == ["engine"]
    svc: dict[str, Any] = doc["services"]["engine"]
    return svc


def test_render_reproduces_the_launch() -> None:
    text = render_compose(make_spec(), "kvh-run1-cpu-tier")
    svc = service(text)
    assert svc["image"] == "vllm/vllm-openai:v0.32.0"
    assert svc["entrypoint"] == ["python3", "-m", "vllm.entrypoints.openai.api_server"]
    assert svc["command"][:4] == ["--model", "m", "--kv-transfer-config", '{"kv_connector":"OffloadingConnector"}']
    assert svc["command"][-1] == "$$HOME"  # a literal dollar survives compose interpolation
    assert svc["init"] is True
    assert svc["shm_size"] == "16g"
    assert svc["ports"] == ["127.0.0.1:18001:8000"]
    assert svc["deploy"]["resources"]["reservations"]["devices"] == [
        {"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]
    health = svc["healthcheck"]
    assert "http://127.0.0.1:8000/v1/models" in " ".join(health["test"])
    assert health["start_period"] == "900s"
    assert "docker-compose -p kvh-run1-cpu-tier" in text


def test_env_values_are_never_written() -> None:
    text = render_compose(make_spec(), "p")
    assert "hf_supersecret" not in text
    env = service(text)["environment"]
    assert env == {"HF_TOKEN": "${HF_TOKEN}", "VLLM_LOGGING_LEVEL": "${VLLM_LOGGING_LEVEL}"}  # names only


def test_no_gpu_request_and_digest_pinning() -> None:
    digest = "sha256:" + "f" * 64
    svc = service(render_compose(make_spec(gpus=None, shm_size=None, env={}, image_digest=digest), "p"))
    assert "deploy" not in svc and "shm_size" not in svc and "environment" not in svc
    assert svc["image"] == f"vllm/vllm-openai:v0.32.0@{digest}"


@pytest.mark.parametrize(("gpus", "device"), [
    ("2", {"driver": "nvidia", "count": 2, "capabilities": ["gpu"]}),
    ("0,1", {"driver": "nvidia", "device_ids": ["0", "1"], "capabilities": ["gpu"]}),
])
def test_gpu_counts_and_ids(gpus: str, device: dict[str, Any]) -> None:
    svc = service(render_compose(make_spec(gpus=gpus), "p"))
    assert svc["deploy"]["resources"]["reservations"]["devices"] == [device]


def test_volumes_and_config_files(tmp_path: Path) -> None:
    spec = make_spec(
        volumes=[Volume(host_path="/mnt/nvme/kv", container_path="/kv-tier/0", purpose="disk-tier"),
                 Volume(host_path="/srv/hf", container_path="/root/.cache/huggingface", read_only=True,
                        purpose="model-cache")],
        config_files=[ConfigFile(name="extra.yaml", container_path="/cfg/extra.yaml", content="kv: 1\n")])
    path = write_compose(spec, "p", tmp_path)
    assert path == tmp_path / "compose-cpu-tier.yaml"
    assert (tmp_path / "config" / "extra.yaml").read_text() == "kv: 1\n"
    svc = service(path.read_text())
    assert svc["volumes"] == ["/mnt/nvme/kv:/kv-tier/0", "/srv/hf:/root/.cache/huggingface:ro",
                              "./config/extra.yaml:/cfg/extra.yaml:ro"]


def test_random_host_port_and_refusals() -> None:
    assert service(render_compose(make_spec(host_port=0), "p"))["ports"] == ["127.0.0.1::8000"]
    with pytest.raises(ValueError, match="no image"):
        render_compose(make_spec(image=None), "p")
    with pytest.raises(ValueError, match="loopback"):
        render_compose(make_spec(host="0.0.0.0"), "p")
