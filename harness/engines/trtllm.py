"""TensorRT-LLM adapter: arms -> ``trtllm-serve MODEL --extra_llm_api_options extra-llm-api.yaml`` (rendered YAML).

Version-aware: the release's entry in ``trtllm-versions.yaml`` (:mod:`harness.engines.trtllm_versions`, chosen by the
pinned image tag or ``engine.version``; a release older than the table is refused) says which flags, ``LlmArgs`` /
``kv_cache_config`` keys and endpoints exist. The YAML holds only keys the scenario set or the release needs:
``enable_block_reuse`` (the harness's prefix-cache setting) and ``host_cache_size`` (the arm's tier) always,
``enable_iter_perf_stats`` (iteration stats), ``return_perf_metrics`` only where it exists (1.1+),
``tokens_per_block`` only where the release knows it. A key the scenario sets that its release lacks is refused
(``LlmArgs`` / ``KvCacheConfig`` forbid unknown fields). Floats are written with ``repr`` (PyYAML's float
representer), which round-trips exactly: ``free_gpu_memory_fraction: 0.1234567`` stays 0.1234567. The chosen
entry's facts travel to the in-image check with each arm's request (``trtllm_versions.release_facts``).

Metrics endpoints follow the entry's ``stats_source``: JSON ``/metrics`` and/or ``/prometheus/metrics``. Where the
release's Prometheus collector drains the iteration-stats queue (``collector_drains_json``), JSON ``/metrics`` is not
scraped at all, so neither reader starves the other.

Containers get the settings NVIDIA documents for the image: ``--ipc host --ulimit memlock=-1 --ulimit
stack=67108864``. ``host_cache_size`` is bytes PER RANK (the host check counts it x TP).
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any, ClassVar

import yaml

from harness.config.arms import Arm, NoOffload, TrtllmKvCache
from harness.config.engine import EngineSpec
from harness.engines.spec import ConfigFile, LaunchSpec, MetricsEndpoint, Volume
from harness.engines.trtllm_versions import Release, ReleaseChoice, choose_release

CONTAINER_PORT = 8000
CONFIG_PATH = "/harness/extra-llm-api.yaml"
CONFIG_FLAG = "--extra_llm_api_options"
CONTAINER_MODEL_CACHE = "/root/.cache/huggingface"
NVIDIA_ULIMITS = {"memlock": -1, "stack": 67108864}
# kv_cache_config keys the harness always writes (its own settings), whatever the user set.
ALWAYS_KV = ("enable_block_reuse", "host_cache_size")


def kv_cache_config(offload: TrtllmKvCache | NoOffload, release: Release | None = None) -> dict[str, Any]:
    """The ``kv_cache_config`` mapping for an arm: the harness's keys plus those the scenario set.

    Raises ValueError naming the field and the fix when the release does not know a key the scenario set.
    """
    kv = offload if isinstance(offload, TrtllmKvCache) else TrtllmKvCache(kind="trtllm")
    values = kv.model_dump(exclude={"kind"})
    chosen = [k for k in values if k in ALWAYS_KV or (k in kv.model_fields_set and values[k] is not None)]
    if release is not None:
        unknown = [k for k in chosen if k not in release.kv_cache_config]
        if unknown:
            raise ValueError(f"offload.{unknown[0]} is not a kv_cache_config key of TensorRT-LLM {release.version} "
                             f"(its KvCacheConfig forbids unknown fields); remove it, or pin a release that has it "
                             f"(see harness/engines/trtllm-versions.yaml)")
    return {k: values[k] for k in chosen}


def render_config(engine: EngineSpec, arm: Arm, choice: ReleaseChoice | None = None) -> str:
    """The extra LLM API options YAML for one arm (keys of the engine's release only)."""
    off = arm.offload
    if not isinstance(off, TrtllmKvCache | NoOffload):
        raise ValueError(f"arm {arm.name!r}: offload kind {off.kind!r} is not a TensorRT-LLM setting (use trtllm)")
    picked = choice or choose_release(engine)
    rel = picked.release
    doc: dict[str, Any] = {"kv_cache_config": kv_cache_config(off, rel)}
    doc.update({k: v for k, v in rel.needs.items() if k in rel.llm_args})
    header = (f"# rendered by harness for arm {arm.name} (TensorRT-LLM {rel.version} keys); do not edit "
              "(re-run `harness plan`)\n")
    return header + yaml.safe_dump(doc, sort_keys=False)


def metrics_endpoints(release: Release) -> list[MetricsEndpoint]:
    """What the harness scrapes for a release: its ``stats_source`` (never JSON where a collector drains it)."""
    eps = release.endpoints
    out: list[MetricsEndpoint] = []
    if release.polls_json and eps.metrics_json:
        out.append(MetricsEndpoint(path=eps.metrics_json, format="trtllm-json"))
    if release.polls_prometheus and eps.prometheus:
        out.append(MetricsEndpoint(path=eps.prometheus, format="prometheus"))
    return out


def advertised_model_name(model: str) -> str:
    """The model name trtllm-serve lists at ``/v1/models`` and expects in requests.

    trtllm-serve has no ``--served-model-name``: it advertises a local model directory by its base name and anything
    else (a Hugging Face id) as given. An absolute path is taken as a local directory.
    """
    return PurePosixPath(model).name if model.startswith("/") else model


def serve_args(engine: EngineSpec, release: Release, port: int, bind: str) -> list[str]:
    """trtllm-serve's arguments; refuses a flag in ``engine.extra_args`` the release does not list."""
    args = [engine.model, "--host", bind, "--port", str(port), "--backend", "pytorch",
            "--tp_size", str(engine.tensor_parallel_size)]
    for flag, value in (("--max_batch_size", engine.max_num_seqs), ("--max_num_tokens", engine.max_num_batched_tokens),
                        ("--max_seq_len", engine.max_model_len)):
        if value is not None:
            args += [flag, str(value)]
    for extra in engine.extra_args:
        flag = extra.split("=", 1)[0]
        if flag.startswith("--") and flag not in release.cli_flags:
            raise ValueError(f"engine.extra_args: {flag} is not a trtllm-serve flag of TensorRT-LLM "
                             f"{release.version} (harness/engines/trtllm-versions.yaml); check `trtllm-serve --help` "
                             "in the pinned image")
    return [*args, release.config_flag, CONFIG_PATH, *engine.extra_args]


class TrtllmAdapter:
    """TensorRT-LLM's ``trtllm-serve`` in its NGC container or as a local process."""

    kind: ClassVar[str] = "trtllm"
    supported_offload: tuple[str, ...] = ("none", "trtllm")
    supports_disk_tier = False

    def offload_kinds(self, engine: EngineSpec) -> tuple[str, ...]:
        """Every supported offload kind, whatever the engine settings."""
        return self.supported_offload

    def launch_spec(self, engine: EngineSpec, arm: Arm, *, host_port: int | None = None) -> LaunchSpec:
        docker = engine.effective_launcher == "docker"
        choice = choose_release(engine)
        release = choice.release
        port = CONTAINER_PORT if docker else (host_port or engine.port)
        bind = "0.0.0.0" if docker else engine.host
        config = ConfigFile(name=f"extra-llm-api-{arm.name}.yaml", container_path=CONFIG_PATH,
                            content=render_config(engine, arm, choice))
        args = serve_args(engine, release, port, bind)
        volumes = []
        if docker and engine.model_cache_dir:
            volumes.append(Volume(host_path=engine.model_cache_dir, container_path=CONTAINER_MODEL_CACHE,
                                  purpose="model-cache"))
        ipc_host = engine.ipc != "private"
        metrics = metrics_endpoints(release)
        return LaunchSpec(
            engine="trtllm", arm=arm.name, image=engine.image, image_digest=engine.image_digest,
            entrypoint=["trtllm-serve"], args=args, env=dict(engine.env), container_port=port, host=engine.host,
            host_port=host_port or engine.port, volumes=volumes, config_files=[config],
            gpus=engine.gpus if docker else None,
            shm_size=engine.shm_size if docker and not ipc_host else None,
            ipc_mode="host" if docker and ipc_host else None,
            ulimits=dict(NVIDIA_ULIMITS) if docker else {},
            readiness_timeout_s=engine.readiness_timeout_s, health_path=release.endpoints.health,
            metrics=metrics, served_model_name=advertised_model_name(engine.model),
        )
