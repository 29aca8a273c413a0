"""Every YAML file under compose/ against the engine facts (docs/engines.md, shared/reference/engines.md).

* TensorRT-LLM files are labelled with the release they are for: a ``# trtllm-version: 1.0.0`` / ``>=1.1.0`` line
  (options files, Prometheus configs), or the default image tag (compose files). A file for 1.0 names neither
  ``return_perf_metrics`` nor ``tokens_per_block`` (1.0's pydantic models reject them), an options file holds only keys
  the release's entry in harness/engines/trtllm-versions.yaml accepts, and a Prometheus config scrapes
  ``/prometheus/metrics`` only for a release that has it.
* vLLM image services use the image's ``vllm serve`` entrypoint (model positional), never the deprecated
  ``python3 -m vllm.entrypoints.openai.api_server``.
* No service has both ``ipc: host`` and ``shm_size``; a vLLM ``shm_size`` holds the CPU tier plus vLLM's own shared
  memory (harness/engines/shm.py); TensorRT-LLM runs with NVIDIA's ipc host + ulimits.
* ``docker-compose config -q`` where docker-compose is installed (the e2e tier always runs it).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.engines.shm import VLLM_OWN_BASE, VLLM_OWN_PER_RANK, recommended_bytes
from harness.engines.sizes import GIB, parse_docker_size

REPO = Path(__file__).resolve().parents[3]
COMPOSE = REPO / "compose"
YAML_FILES = sorted([*COMPOSE.rglob("*.yaml"), *COMPOSE.rglob("*.yml")])
COMPOSE_FILES = [p for p in YAML_FILES if isinstance(yaml.safe_load(p.read_text()), dict)
                 and "services" in yaml.safe_load(p.read_text())]
VERSIONS = yaml.safe_load((REPO / "harness" / "engines" / "trtllm-versions.yaml").read_text())["releases"]
LATER_KEYS = ("return_perf_metrics", "tokens_per_block")     # absent from TensorRT-LLM 1.0
MODULE_ENTRY = "vllm.entrypoints.openai.api_server"
_VAR = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)(?::-([^}]*))?\}")
_LABEL = re.compile(r"^# trtllm-version: (>=)?([0-9]+\.[0-9]+\.[0-9]+)\s*$", re.M)
_TRTLLM_TAG = re.compile(r"tensorrt-llm/release:([0-9]+\.[0-9]+\.[0-9]+)")


def rel(path: Path) -> str:
    return str(path.relative_to(COMPOSE))


def defaults(text: str) -> str:
    """Interpolate ${VAR:-default} the way compose does when VAR is unset."""
    return _VAR.sub(lambda m: m.group(2) or "", text)


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def release(version: str) -> dict[str, Any]:
    """The trtllm-versions.yaml entry for a version: the newest at or below it."""
    entries = [r for r in VERSIONS if version_key(r["version"]) <= version_key(version)]
    assert entries, f"no trtllm-versions.yaml entry at or below {version}"
    return max(entries, key=lambda r: version_key(r["version"]))


def label(path: Path) -> str | None:
    """The TensorRT-LLM release a file is for: its ``# trtllm-version:`` line, else the default image tag."""
    text = path.read_text()
    found = _LABEL.search(text)
    if found:
        return found.group(2)
    tag = _TRTLLM_TAG.search(defaults(text))
    return tag.group(1) if tag else None


def services(path: Path) -> dict[str, dict[str, Any]]:
    svcs: dict[str, dict[str, Any]] = yaml.safe_load(path.read_text())["services"]
    return svcs


def keys(node: object) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            found.add(str(key))
            found |= keys(value)
    elif isinstance(node, list):
        for item in node:
            found |= keys(item)
    return found


def flag_value(command: list[str], flag: str) -> str | None:
    for i, arg in enumerate(command):
        if arg.startswith(flag + "="):
            return defaults(arg.split("=", 1)[1])
        if arg == flag and i + 1 < len(command):
            return defaults(command[i + 1])
    return None


def test_every_yaml_parses_and_the_set_is_known() -> None:
    for path in YAML_FILES:
        yaml.safe_load(path.read_text())
    names = {rel(p) for p in YAML_FILES}
    assert {"trtllm/extra-llm-api-host-1.0.yaml", "trtllm/extra-llm-api-host-1.1.yaml",
            "monitoring/prometheus.yml", "monitoring/prometheus-trtllm-1.1.yml"} <= names
    assert {rel(p) for p in COMPOSE_FILES} == {"vllm-gpu-only.yaml", "vllm-cpu-tier.yaml", "vllm-tiered.yaml",
                                              "trtllm-host.yaml", "monitoring/docker-compose.yaml"}


@pytest.mark.parametrize("path", [p for p in YAML_FILES if p.parent.name == "trtllm"], ids=rel)
def test_trtllm_options_files_are_labelled_and_hold_only_their_release_keys(path: Path) -> None:
    text = path.read_text()
    assert _LABEL.search(text), f"{rel(path)}: first lines need '# trtllm-version: X.Y.Z' or '>=X.Y.Z'"
    version = label(path)
    assert version is not None and path.stem.endswith("-" + version.rsplit(".", 1)[0]), (
        f"{rel(path)}: the file name carries the release (-X.Y)")
    entry = release(version)
    options = yaml.safe_load(text)
    assert set(options) <= set(entry["llm_args"]), f"{rel(path)}: keys {version} rejects"
    assert set(options["kv_cache_config"]) <= set(entry["kv_cache_config"]), f"{rel(path)}: kv_cache_config keys"
    for key, value in entry["needs"].items():
        assert options.get(key) == value, f"{rel(path)}: {version} needs {key}: {value}"


@pytest.mark.parametrize("path", YAML_FILES, ids=rel)
def test_files_for_trtllm_1_0_name_no_later_keys(path: Path) -> None:
    version = label(path)
    if version is None or release(version)["version"] != "1.0.0":
        pytest.skip("not a TensorRT-LLM 1.0 file")
    text = path.read_text()
    for key in LATER_KEYS:
        assert key not in keys(yaml.safe_load(text)), f"{rel(path)}: {key} does not exist in TensorRT-LLM 1.0"
        assert key not in text, f"{rel(path)}: {key} does not exist in TensorRT-LLM 1.0 (not even commented)"


@pytest.mark.parametrize("path", sorted((COMPOSE / "monitoring").glob("prometheus*.yml")), ids=rel)
def test_prometheus_scrapes_the_endpoint_the_release_has(path: Path) -> None:
    version = label(path)
    assert version is not None, f"{rel(path)}: label the TensorRT-LLM release it is for"
    expected = release(version)["endpoints"]["prometheus"]
    jobs = {job["job_name"]: job.get("metrics_path", "/metrics") for job in yaml.safe_load(path.read_text())[
        "scrape_configs"]}
    assert jobs["vllm"] == "/metrics"
    if expected is None:
        assert "trtllm" not in jobs and "/prometheus/metrics" not in jobs.values(), f"{version}: no such endpoint"
        assert "no endpoint in prometheus format" in path.read_text().lower(), "say so in a comment"
    else:
        assert jobs["trtllm"] == expected


def test_monitoring_stack_defaults_to_the_pinned_release() -> None:
    svc = services(COMPOSE / "monitoring" / "docker-compose.yaml")["prometheus"]
    mount = next(defaults(v) for v in svc["volumes"] if v.endswith(":/etc/prometheus/prometheus.yml:ro"))
    default = COMPOSE / "monitoring" / mount.split(":")[0]
    pinned = label(COMPOSE / "trtllm-host.yaml")
    assert pinned is not None and label(default) == pinned


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=rel)
def test_no_service_has_both_ipc_host_and_shm_size(path: Path) -> None:
    for name, svc in services(path).items():
        assert not (svc.get("ipc") == "host" and "shm_size" in svc), f"{rel(path)}: {name}: docker refuses both"


def vllm_services(path: Path) -> list[tuple[str, dict[str, Any]]]:
    return [(n, s) for n, s in services(path).items() if "vllm/vllm-openai" in defaults(str(s.get("image", "")))]


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=rel)
def test_vllm_image_services_use_vllm_serve(path: Path) -> None:
    for name, svc in vllm_services(path):
        line = " ".join([*svc.get("entrypoint", []), *svc.get("command", [])])
        assert MODULE_ENTRY not in line and f"python3 -m {MODULE_ENTRY}" not in line, f"{name}: deprecated module"
        assert svc["entrypoint"] == ["vllm", "serve"], f"{name}: the image's own ENTRYPOINT"
        command = svc["command"]
        assert not command[0].startswith("-") and flag_value(command, "--model") is None, "model is positional"


def cpu_tier_bytes(command: list[str]) -> int:
    gib = flag_value(command, "--kv-offloading-size")
    if gib is not None:
        return int(float(gib) * GIB)
    config = flag_value(command, "--kv-transfer-config")
    if config is not None:
        return int(json.loads(config)["kv_connector_extra_config"]["cpu_bytes_to_use"])
    return 0


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=rel)
def test_vllm_shm_holds_the_cpu_tier(path: Path) -> None:
    for name, svc in vllm_services(path):
        if svc.get("ipc") == "host":
            continue
        tier = cpu_tier_bytes(svc["command"])
        tp = int(flag_value(svc["command"], "--tensor-parallel-size") or 1)
        size = parse_docker_size(defaults(str(svc["shm_size"])))
        assert size >= recommended_bytes(tier, VLLM_OWN_BASE + VLLM_OWN_PER_RANK * tp), (
            f"{rel(path)}: {name}: shm_size must hold tier + vLLM's own use + margin (harness/engines/shm.py)")
        assert "harness/engines/shm.py" in path.read_text(), f"{rel(path)}: say how the figure is computed"


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=rel)
def test_trtllm_services_run_as_nvidia_documents(path: Path) -> None:
    for name, svc in services(path).items():
        image = defaults(str(svc.get("image", "")))
        if "tensorrt-llm" not in image:
            continue
        assert svc.get("ipc") == "host" and "shm_size" not in svc, name
        assert svc["ulimits"] == {"memlock": -1, "stack": 67108864}, name
        version = label(path)
        assert version is not None
        entry = release(version)
        flags = {a.split("=", 1)[0] for a in svc["command"] if a.startswith("--")}
        assert flags <= set(entry["cli_flags"]), f"{name}: flags trtllm-serve {version} lacks"
        mount = next(defaults(v) for v in svc["volumes"] if "extra-llm-api" in v)
        options = COMPOSE / mount.split(":")[0]
        assert options.exists() and label(options) == version, f"{name}: mount the options file for {version}"


def _compose_commands() -> list[list[str]]:
    commands = []
    if shutil.which("docker-compose"):
        commands.append(["docker-compose"])
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True, timeout=30,
                                 check=False).returncode == 0:
        commands.append([docker, "compose"])
    return commands


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=rel)
def test_docker_compose_config_accepts_it(path: Path) -> None:
    commands = _compose_commands()
    if not commands:
        pytest.skip("neither docker-compose nor docker compose installed (the e2e tier runs this)")
    for command in commands:
        proc = subprocess.run([*command, "-f", str(path), "config", "-q"], capture_output=True, text=True,
                              timeout=60, check=False, cwd=path.parent)
        assert proc.returncode == 0, f"{' '.join(command)} config {rel(path)}: {proc.stderr}"
