"""TensorRT-LLM adapter: arms -> ``trtllm-serve MODEL --extra_llm_api_options extra-llm-api.yaml`` (rendered YAML).

``--extra_llm_api_options`` is the option's name in every trtllm-serve release; newer releases add ``--config`` as
an alias, which the pinned 1.0 images do not know.

The YAML carries ``kv_cache_config`` (``host_cache_size`` bytes turns host offload on) and enables the stats the
harness scrapes: ``enable_iter_perf_stats`` (JSON iteration stats at ``/metrics``) and ``return_perf_metrics``
(Prometheus text at ``/prometheus/metrics``). Only host-memory offload is configured for TensorRT-LLM.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Any

import yaml

from harness.config.arms import Arm, NoOffload, TrtllmKvCache
from harness.config.engine import EngineSpec
from harness.engines.registry import register
from harness.engines.spec import ConfigFile, LaunchSpec, MetricsEndpoint, Volume

CONTAINER_PORT = 8000
CONFIG_PATH = "/harness/extra-llm-api.yaml"
CONFIG_FLAG = "--extra_llm_api_options"
CONTAINER_MODEL_CACHE = "/root/.cache/huggingface"


def kv_cache_config(offload: TrtllmKvCache | NoOffload) -> dict[str, Any]:
    """The ``kv_cache_config`` mapping for an arm (defaults for a gpu-only ``none`` arm)."""
    kv = offload if isinstance(offload, TrtllmKvCache) else TrtllmKvCache(kind="trtllm")
    cfg: dict[str, Any] = {
        "enable_block_reuse": kv.enable_block_reuse,
        "free_gpu_memory_fraction": kv.free_gpu_memory_fraction,
        "host_cache_size": kv.host_cache_size,
        "tokens_per_block": kv.tokens_per_block,
    }
    if kv.secondary_offload_min_priority is not None:
        cfg["secondary_offload_min_priority"] = kv.secondary_offload_min_priority
    if kv.max_tokens is not None:
        cfg["max_tokens"] = kv.max_tokens
    if kv.enable_partial_reuse is not None:
        cfg["enable_partial_reuse"] = kv.enable_partial_reuse
    return cfg


def render_config(engine: EngineSpec, arm: Arm) -> str:
    """The extra LLM API options YAML for one arm."""
    off = arm.offload
    if not isinstance(off, TrtllmKvCache | NoOffload):
        raise ValueError(f"arm {arm.name!r}: offload kind {off.kind!r} is not a TensorRT-LLM setting (use trtllm)")
    doc: dict[str, Any] = {
        "kv_cache_config": kv_cache_config(off),
        "enable_iter_perf_stats": True,
        "return_perf_metrics": True,
    }
    header = f"# rendered by harness for arm {arm.name}; do not edit (re-run `harness plan`)\n"
    return header + yaml.safe_dump(doc, sort_keys=False)


def advertised_model_name(model: str) -> str:
    """The model name trtllm-serve lists at ``/v1/models`` and expects in requests.

    trtllm-serve has no ``--served-model-name``: it advertises a local model directory by its base name and anything
    else (a Hugging Face id) as given. An absolute path is taken as a local directory.
    """
    return PurePosixPath(model).name if model.startswith("/") else model


class TrtllmAdapter:
    """TensorRT-LLM's ``trtllm-serve`` in its NGC container or as a local process."""

    kind = "trtllm"
    supported_offload: tuple[str, ...] = ("none", "trtllm")
    supports_disk_tier = False

    def offload_kinds(self, engine: EngineSpec) -> tuple[str, ...]:
        """Every supported offload kind, whatever the engine settings."""
        return self.supported_offload

    def launch_spec(self, engine: EngineSpec, arm: Arm, *, host_port: int | None = None) -> LaunchSpec:
        docker = engine.effective_launcher == "docker"
        port = CONTAINER_PORT if docker else (host_port or engine.port)
        bind = "0.0.0.0" if docker else engine.host
        config = ConfigFile(name=f"extra-llm-api-{arm.name}.yaml", container_path=CONFIG_PATH,
                            content=render_config(engine, arm))
        args = [engine.model, "--host", bind, "--port", str(port), "--backend", "pytorch",
                "--tp_size", str(engine.tensor_parallel_size)]
        if engine.max_num_seqs is not None:
            args += ["--max_batch_size", str(engine.max_num_seqs)]
        if engine.max_num_batched_tokens is not None:
            args += ["--max_num_tokens", str(engine.max_num_batched_tokens)]
        if engine.max_model_len is not None:
            args += ["--max_seq_len", str(engine.max_model_len)]
        args += [CONFIG_FLAG, CONFIG_PATH, *engine.extra_args]
        volumes = []
        if docker and engine.model_cache_dir:
            volumes.append(Volume(host_path=engine.model_cache_dir, container_path=CONTAINER_MODEL_CACHE,
                                  purpose="model-cache"))
        return LaunchSpec(
            engine="trtllm", arm=arm.name, image=engine.image, image_digest=engine.image_digest,
            entrypoint=["trtllm-serve"], args=args, env=dict(engine.env), container_port=port, host=engine.host,
            host_port=host_port or engine.port, volumes=volumes, config_files=[config],
            gpus=engine.gpus if docker else None, shm_size=engine.shm_size if docker else None,
            readiness_timeout_s=engine.readiness_timeout_s,
            metrics=[MetricsEndpoint(path="/metrics", format="trtllm-json"),
                     MetricsEndpoint(path="/prometheus/metrics", format="prometheus")],
            served_model_name=advertised_model_name(engine.model),
        )


ADAPTER = register(TrtllmAdapter())
