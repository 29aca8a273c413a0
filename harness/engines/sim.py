"""Simulator adapter: arms -> ``harness sim serve`` with the same offload flags the real engines take.

The simulator mirrors vLLM's offload flags (``--kv-offloading-size``, ``--kv-transfer-config``) in its ``vllm``
flavor and TensorRT-LLM's ``host_cache_size`` in its ``trtllm`` flavor, so a scenario moves between the simulator and
a real engine by changing ``engine.kind`` (and the image). Every launch spec it makes is marked ``simulated``.

``engine.sim_noise`` becomes ``--noise-seed S --step-jitter ... --run-drift ... --drift-per-hour ...`` with
``S = launch_seed(sim_noise.seed, arm.name)`` (a stable hash): each arm -- and an A/A re-run of the baseline under
another name such as ``baseline-aa`` -- gets its own reproducible draw of the per-run drift.
"""

from __future__ import annotations

import sys
from typing import ClassVar

from harness.config.arms import Arm, NoOffload, TrtllmKvCache
from harness.config.engine import EngineSpec
from harness.engines.shm import shm_need
from harness.engines.sizes import float_flag
from harness.engines.spec import LaunchSpec, MetricsEndpoint
from harness.engines.vllm import offload_args as vllm_offload_args
from harness.engines.volumes import disk_tier_volumes
from harness.sim.noise_spec import launch_seed

CONTAINER_PORT = 8000


class SimAdapter:
    """The simulated engine (``harness/sim``) as a local process or in a container built from this package."""

    kind: ClassVar[str] = "sim"
    supported_offload: tuple[str, ...] = ("none", "vllm-native", "vllm-connector", "trtllm")
    supports_disk_tier = True

    def offload_kinds(self, engine: EngineSpec) -> tuple[str, ...]:
        """The simulator speaks one engine's flags at a time: vLLM's offload kinds or TensorRT-LLM's."""
        return ("none", "trtllm") if engine.sim_flavor == "trtllm" else ("none", "vllm-native", "vllm-connector")

    def launch_spec(self, engine: EngineSpec, arm: Arm, *, host_port: int | None = None) -> LaunchSpec:
        if arm.offload.kind not in self.offload_kinds(engine):
            need = "trtllm" if isinstance(arm.offload, TrtllmKvCache) else "vllm"
            raise ValueError(f"arm {arm.name!r}: offload kind {arm.offload.kind!r} is a {need} setting; the simulator "
                             f"speaks it with engine.sim_flavor: {need} (now {engine.sim_flavor})")
        docker = engine.effective_launcher == "docker"
        port = CONTAINER_PORT if docker else (host_port or engine.port)
        bind = "0.0.0.0" if docker else engine.host
        volumes, disk_map = disk_tier_volumes(arm, docker=docker)
        args = ["--host", bind, "--port", str(port), "--flavor", engine.sim_flavor,
                "--model", engine.model, "--time-scale", float_flag(engine.sim_time_scale),
                "--gpu-memory-utilization", float_flag(engine.gpu_memory_utilization)]
        args += ["--profile-file", engine.sim_profile_file] if engine.sim_profile_file else \
            ["--profile", engine.sim_profile]
        if engine.served_model_name:
            args += ["--served-model-name", engine.served_model_name]
        for flag, value in (("--max-model-len", engine.max_model_len), ("--max-num-seqs", engine.max_num_seqs),
                            ("--max-num-batched-tokens", engine.max_num_batched_tokens)):
            if value is not None:
                args += [flag, str(value)]
        args.append("--enable-prefix-caching" if engine.enable_prefix_caching else "--no-enable-prefix-caching")
        off = arm.offload
        if isinstance(off, TrtllmKvCache):
            if off.host_cache_size:
                args += ["--host-cache-size", str(off.host_cache_size)]
            args += ["--block-size", str(off.tokens_per_block)]
        elif not isinstance(off, NoOffload):
            args += vllm_offload_args(arm, disk_dir_map=disk_map)
            for tier in arm.fs_tiers():
                if tier.size_gib is not None:
                    args += ["--disk-tier-max-bytes", str(int(tier.size_gib * (1 << 30)))]
        noise = engine.sim_noise
        if noise is not None:
            args += ["--noise-seed", str(launch_seed(noise.seed, arm.name)),
                     "--step-jitter", float_flag(noise.step_jitter), "--run-drift", float_flag(noise.run_drift),
                     "--drift-per-hour", float_flag(noise.drift_per_hour)]
        shm = shm_need(engine, arm)
        if docker and shm.size_bytes is not None and shm.tier_bytes:
            args += ["--shm-bytes", str(shm.size_bytes)]  # the container's /dev/shm, checked as vLLM does
        args += [*engine.sim_args, *engine.extra_args]
        entry = ["python3", "-m", "harness.sim"] if docker else [sys.executable, "-m", "harness.sim"]
        # the trtllm flavour emulates a release whose Prometheus collector drains the JSON stats queue (1.3 entry of
        # harness/engines/trtllm-versions.yaml): only /prometheus/metrics is scraped, as for that release
        metrics = ([MetricsEndpoint(path="/prometheus/metrics", format="prometheus")]
                   if engine.sim_flavor == "trtllm" else [MetricsEndpoint(path="/metrics", format="prometheus")])
        return LaunchSpec(
            engine="sim", arm=arm.name, image=engine.image, image_digest=engine.image_digest,
            entrypoint=[*entry, "serve"], args=args, env=dict(engine.env), container_port=port, host=engine.host,
            host_port=host_port or engine.port, volumes=volumes, gpus=None,
            shm_size=str(shm.size_bytes) if docker and shm.size_bytes is not None else None,
            ipc_mode="host" if docker and shm.ipc_host else None,
            readiness_timeout_s=engine.readiness_timeout_s, metrics=metrics,
            served_model_name=engine.name_served, disk_tier_dirs=[t.root_dir for t in arm.fs_tiers()],
            simulated=True,
        )
