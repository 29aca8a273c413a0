"""The shipped compose files (compose/): structure both compose v1 and v2 accept, loopback ports, GPU reservations,
health checks, pinned images, entrypoints, ipc host or shm_size, the disk-tier volume, and a Grafana dashboard whose
metric names the catalogs know. Version and /dev/shm facts per file: test_shipped_compose.py.

`docker-compose config -q` on each file runs in the e2e tier (tests/e2e/test_e2e_compose.py), where it is installed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
COMPOSE = REPO / "compose"
ENGINE_FILES = ["vllm-gpu-only.yaml", "vllm-cpu-tier.yaml", "vllm-tiered.yaml", "trtllm-host.yaml"]
DASHBOARD = COMPOSE / "monitoring" / "grafana" / "dashboards" / "kv-offload.json"
_VAR = re.compile(r"\$\{([A-Z_][A-Z0-9_]*)(?::-([^}]*))?\}")
# Offload series from the vLLM 0.32.0 source (engines.md) that no catalog quantity reads yet.
SOURCE_ONLY_SERIES = {
    "vllm:kv_offload_allocation_failure_total", "vllm:kv_offload_tiering_promotion_job_failures_total",
    "vllm:kv_offload_tiering_backpressure_stores_dropped_total", "vllm:external_prefix_cache_queries_total",
    "trtllm_kv_cache_hit_rate", "trtllm_kv_cache_reused_blocks_total", "trtllm_kv_cache_missed_blocks_total",
}


def load(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((COMPOSE / name).read_text())
    assert isinstance(doc, dict)
    return doc


def defaults(text: str) -> str:
    """Interpolate ${VAR:-default} the way compose does when VAR is unset."""
    return _VAR.sub(lambda m: m.group(2) or "", text)


def only_service(doc: dict[str, Any]) -> dict[str, Any]:
    assert "version" not in doc, "no version key: compose v1 1.27+ and v2 both read the spec format"
    services = doc["services"]
    assert len(services) == 1
    svc: dict[str, Any] = next(iter(services.values()))
    return svc


@pytest.mark.parametrize("name", ENGINE_FILES)
def test_engine_files_have_the_launch_essentials(name: str) -> None:
    svc = only_service(load(name))
    image = defaults(svc["image"])
    assert ":" in image and not image.endswith(":latest"), f"{name}: pin the image tag"
    assert svc["init"] is True
    ipc_host = svc.get("ipc") == "host"
    assert ipc_host != bool(svc.get("shm_size")), f"{name}: ipc host OR shm_size (docker refuses both)"
    if name.startswith("trtllm"):
        assert ipc_host and svc["ulimits"] == {"memlock": -1, "stack": 67108864}, "NVIDIA's documented settings"
    else:
        assert svc["entrypoint"] == ["vllm", "serve"] and not svc["command"][0].startswith("-"), "model positional"
    for port in svc["ports"]:
        assert defaults(port).startswith("127.0.0.1:"), f"{name}: publish on loopback only"
    devices = svc["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]
    health = svc["healthcheck"]
    assert health["test"][0] == "CMD" and "/v1/models" in " ".join(health["test"])
    assert re.fullmatch(r"[0-9]+s", health["start_period"])
    assert any(v.endswith(":/root/.cache/huggingface") for v in svc["volumes"])
    assert svc["environment"]["HF_TOKEN"] == "${HF_TOKEN:-}", "secrets pass through, never written"


def test_vllm_arms_differ_only_in_cache_settings() -> None:
    commands = {n: only_service(load(n))["command"] for n in ENGINE_FILES if n.startswith("vllm")}
    base = commands["vllm-gpu-only.yaml"]
    assert "--enable-prefix-caching" in base
    cpu = commands["vllm-cpu-tier.yaml"]
    assert cpu[:len(base)] == base
    assert {a.split("=")[0] for a in cpu[len(base):]} == {"--kv-offloading-size", "--kv-offloading-backend"}
    tiered = commands["vllm-tiered.yaml"]
    assert tiered[:len(base)] == base
    assert tiered[len(base)] == "--kv-transfer-config"
    config = json.loads(defaults(tiered[len(base) + 1]))
    extra = config["kv_connector_extra_config"]
    assert config["kv_connector"] == "OffloadingConnector" and config["kv_role"] == "kv_both"
    assert extra["spec_name"] == "TieringOffloadingSpec" and extra["cpu_bytes_to_use"] == 32 * 2**30
    assert extra["secondary_tiers"][0]["type"] == "fs"
    tier_dir = extra["secondary_tiers"][0]["root_dir"]
    volumes = only_service(load("vllm-tiered.yaml"))["volumes"]
    assert any(v.endswith(f":{tier_dir}") for v in volumes), "the fs tier directory is a mounted volume"


def test_trtllm_host_offload_options() -> None:
    svc = only_service(load("trtllm-host.yaml"))
    mount = defaults(next(v for v in svc["volumes"] if v.endswith(":ro") and "extra-llm-api" in v))
    local = COMPOSE / mount.split(":")[0]
    assert local.name == "extra-llm-api-host-1.0.yaml", "the default image is release:1.0.0"
    options = yaml.safe_load(local.read_text())
    assert options["kv_cache_config"]["host_cache_size"] > 0
    assert options["enable_iter_perf_stats"] is True
    assert "return_perf_metrics" not in options and "tokens_per_block" not in options["kv_cache_config"]
    later = yaml.safe_load((COMPOSE / "trtllm" / "extra-llm-api-host-1.1.yaml").read_text())
    assert later["return_perf_metrics"] is True and later["kv_cache_config"] == options["kv_cache_config"]
    flag = next(a for a in svc["command"] if a.startswith("--extra_llm_api_options="))
    assert flag.split("=", 1)[1] == mount.split(":")[1]


def test_monitoring_stack() -> None:
    doc = load("monitoring/docker-compose.yaml")
    assert "version" not in doc
    assert set(doc["services"]) == {"prometheus", "grafana"}
    for name, svc in doc["services"].items():
        assert ":" in defaults(svc["image"]) and not defaults(svc["image"]).endswith(":latest"), name
        assert svc["network_mode"] == "host" and "healthcheck" in svc
        for volume in svc["volumes"]:
            src = defaults(volume).split(":")[0]
            if src.startswith("./"):
                assert (COMPOSE / "monitoring" / src).exists(), f"{name}: {src} is missing"
    assert "--web.listen-address=127.0.0.1:9090" in doc["services"]["prometheus"]["command"]
    assert doc["services"]["grafana"]["environment"]["GF_SERVER_HTTP_ADDR"] == "127.0.0.1"
    prom = yaml.safe_load((COMPOSE / "monitoring" / "prometheus.yml").read_text())
    paths = {job["job_name"]: job.get("metrics_path", "/metrics") for job in prom["scrape_configs"]}
    assert paths["vllm"] == "/metrics" and "trtllm" not in paths, "TensorRT-LLM 1.0 has no Prometheus endpoint"
    prom11 = yaml.safe_load((COMPOSE / "monitoring" / "prometheus-trtllm-1.1.yml").read_text())
    paths = {job["job_name"]: job.get("metrics_path", "/metrics") for job in prom11["scrape_configs"]}
    assert paths["vllm"] == "/metrics" and paths["trtllm"] == "/prometheus/metrics"
    provisioning = COMPOSE / "monitoring" / "grafana" / "provisioning"
    source = yaml.safe_load((provisioning / "datasources" / "prometheus.yaml").read_text())
    uid = source["datasources"][0]["uid"]
    dash = json.loads(DASHBOARD.read_text())
    assert {p["datasource"]["uid"] for p in dash["panels"] if "datasource" in p} == {uid}
    providers = yaml.safe_load((provisioning / "dashboards" / "kvoffload.yaml").read_text())
    assert providers["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"


def _catalog_series() -> set[str]:
    found: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "series" and isinstance(value, str):
                    found.add(value)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for path in (REPO / "harness" / "engines" / "catalogs").glob("*.yaml"):
        walk(yaml.safe_load(path.read_text()))
    return found


def test_dashboard_uses_known_offload_metric_names() -> None:
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    assert len(exprs) >= 20
    names = {re.sub(r"_bucket$", "", n) for e in exprs for n in re.findall(r"\b(vllm:[a-z_:]+|trtllm_[a-z_]+)", e)}
    known = _catalog_series() | SOURCE_ONLY_SERIES
    assert names - known == set(), "dashboard metric names must be in an engine catalog (or engines.md)"
    for needed in ("vllm:prompt_tokens_cached_by_source_total", "vllm:kv_offload_load_bytes_total",
                   "vllm:kv_offload_tiering_read_bytes_total", "vllm:kv_offload_cpu_cache_usage_perc",
                   "trtllm_kv_cache_onboard_bytes_total"):
        assert needed in names
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
