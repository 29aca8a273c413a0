"""``harness sim ...`` / ``python -m harness.sim ...``: run the simulated engine.

Start-up failures print the engine-style message as the last line on stderr and exit 1 (as a real engine
process would); usage errors exit 2: a bad flag combination, a float option that is ``nan``/``inf``, a CPU tier
that is not positive, a ``--profile-file`` that is not a readable regular file of valid, bounded YAML.
"""

from __future__ import annotations

import asyncio
import inspect
import math
import os
import shutil
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from harness.core.json_depth import JSON_DEPTH_LIMIT, json_too_deep
from harness.core.term import safe_text
from harness.sim.config import ConfigError, EngineConfig, build_engine_config
from harness.sim.faults import FaultError, Faults
from harness.sim.noise_spec import NoiseError, NoiseSpec, describe
from harness.sim.options import ServeOptions
from harness.sim.profile import ProfileError, ProfileFileError, builtin_profile_names, load_profile

sim_app = typer.Typer(
    help="The simulated engine: an OpenAI-compatible server with a modelled paged KV cache and offload tiers "
    "(SIMULATED; no GPU needed).",
    no_args_is_help=True,
    add_completion=False,
)


@sim_app.callback()
def _main() -> None:
    """Run or inspect the simulated engine."""


def _fail(message: str) -> None:
    print(message, file=sys.stderr, flush=True)
    raise typer.Exit(1)


@sim_app.command("profiles")
def profiles(sources: Annotated[bool, typer.Option("--sources", help="also print each profile's sources (the "
                                                   "notes every figure rests on)")] = False) -> None:
    """List the built-in profiles: name, what they model (model, GPU) and, with --sources, where the figures come
    from."""
    for name in builtin_profile_names():
        p = load_profile(name)
        parts = ", ".join(dict.fromkeys(s.part for s in p.sources))
        typer.echo(f"{name}: {p.description}")
        typer.echo(f"  model {p.model.name} on {p.gpu.name}; sources: {parts or 'none'}")
        if sources:
            for note in p.sources:
                lines = note.text.splitlines()
                typer.echo(f"  [{note.part}] {lines[0]}")
                for line in lines[1:]:
                    typer.echo(f"  {' ' * (len(note.part) + 2)} {line}")


@sim_app.command("serve")
def serve(
    host: Annotated[str, typer.Option(help="Address to bind (loopback unless told otherwise).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port; 0 picks a free one and prints it.")] = 8000,
    profile: Annotated[str | None, typer.Option(help="Built-in profile name (default: demo).")] = None,
    profile_file: Annotated[Path | None, typer.Option(help="Profile YAML file.")] = None,
    flavor: Annotated[str, typer.Option(help="Engine to imitate: vllm or trtllm.")] = "vllm",
    model: Annotated[str, typer.Option(help="Model name.")] = "sim-model",
    served_model_name: Annotated[list[str] | None, typer.Option(help="Name(s) served in the API.")] = None,
    max_num_seqs: Annotated[int | None, typer.Option(help="Max running sequences.")] = None,
    max_num_batched_tokens: Annotated[int | None, typer.Option(help="Token budget per step.")] = None,
    max_model_len: Annotated[int | None, typer.Option(help="Context length.")] = None,
    block_size: Annotated[int | None, typer.Option(help="Tokens per KV block.")] = None,
    gpu_memory_utilization: Annotated[float | None, typer.Option(help="GPU memory fraction.")] = None,
    enable_prefix_caching: Annotated[bool, typer.Option(help="GPU prefix caching.")] = True,
    enable_prompt_tokens_details: Annotated[
        bool, typer.Option(help="Accepted; the simulator always reports cached_tokens.")] = False,
    kv_offloading_size: Annotated[float | None, typer.Option(help="vLLM KV offload size (GiB).")] = None,
    kv_offloading_backend: Annotated[str, typer.Option(help="vLLM offload backend (native only).")] = "native",
    kv_transfer_config: Annotated[str | None, typer.Option(help="vLLM OffloadingConnector JSON.")] = None,
    host_cache_size: Annotated[int | None, typer.Option(help="TensorRT-LLM host_cache_size (bytes).")] = None,
    disk_tier_max_bytes: Annotated[int | None, typer.Option(help="Cap of the fs tier (modelled bytes).")] = None,
    time_scale: Annotated[float, typer.Option(help="Wall seconds per modelled second (2.0 = twice as slow).")] = 1.0,
    ground_truth: Annotated[Path | None, typer.Option(help="Write per-request ground truth (JSONL).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of outputs and fault injection.")] = 0,
    startup_delay_s: Annotated[float, typer.Option(help="Load time (wall seconds) before /v1/models is 200.")] = 0.0,
    fail_start: Annotated[str | None, typer.Option(help="Refuse to start with this message (exit 1).")] = None,
    crash_after_s: Annotated[float | None, typer.Option(help="Die after this many seconds.")] = None,
    crash_after_requests: Annotated[int | None, typer.Option(help="Die after this many requests.")] = None,
    stall_after_tokens: Annotated[int | None, typer.Option(help="Streams stall after N tokens.")] = None,
    error_rate: Annotated[float, typer.Option(help="Fraction of requests answered HTTP 500.")] = 0.0,
    malformed_sse_rate: Annotated[float, typer.Option(help="Fraction of malformed SSE chunks.")] = 0.0,
    disk_read_slowdown: Annotated[float, typer.Option(help="Disk-tier reads take X times longer.")] = 1.0,
    noise_seed: Annotated[int, typer.Option(help="Seed of the noise below (harness/sim/noise.py).")] = 0,
    step_jitter: Annotated[float, typer.Option(help="Per-step compute-time lognormal sigma (0 = off).")] = 0.0,
    run_drift: Annotated[float, typer.Option(help="Per-start compute-time lognormal sigma (0 = off).")] = 0.0,
    drift_per_hour: Annotated[float, typer.Option(help="Compute slows by this fraction per modelled hour.")] = 0.0,
    disk_read_tail_prob: Annotated[float, typer.Option(help="Share of disk reads that are slow (0 = off).")] = 0.0,
    disk_read_tail_factor: Annotated[float, typer.Option(help="Slow disk reads take X times longer.")] = 1.0,
    shm_bytes: Annotated[str | None, typer.Option(help="Shared memory given to the server (bytes, or 'host' for the "
                                                  "host's free /dev/shm): a vLLM CPU tier larger than it is refused "
                                                  "at start-up, as vLLM does.")] = None,
    api_key: Annotated[str | None, typer.Option(help="Accepted where vLLM takes --api-key (a scenario moves "
                                                "between the two); the simulator does not check it.")] = None,
) -> None:
    """Serve the simulated engine (OpenAI-compatible API, vLLM/TensorRT-LLM-style metrics)."""
    from harness.sim.server import serve as run_server  # aiohttp, prometheus_client: ~140 ms off every CLI start

    params = dict(locals())
    params.pop("run_server")
    try:
        opts, cfg, banner = resolve_serve(params)
    except UsageError as exc:
        raise typer.BadParameter(str(exc), param_hint=exc.param) from exc
    except StartupError as exc:
        _fail(str(exc))
        return
    try:
        asyncio.run(run_server(opts, cfg, banner))
    except ConfigError as exc:
        _fail(f"harness-sim: error: {exc}")
    except OSError as exc:
        _fail(f"harness-sim: error: cannot serve on {host}:{port}: {exc.strerror or exc}")


def dev_mode_env() -> bool:
    """``VLLM_SERVER_DEV_MODE`` as vLLM 0.32 reads it (``bool(int(...))``, default 0); not an integer: refused."""
    raw = os.environ.get("VLLM_SERVER_DEV_MODE", "0")
    try:
        return bool(int(raw))
    except ValueError:
        raise StartupError(f"harness-sim: error: VLLM_SERVER_DEV_MODE must be an integer, not {safe_text(raw)!r}") \
            from None


class UsageError(ValueError):
    """A bad flag combination (exit status 2)."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


class StartupError(RuntimeError):
    """The engine refuses to start; the message is printed as the last stderr line (exit status 1)."""


def serve_defaults() -> dict[str, Any]:
    """Default value of every ``serve`` parameter (keyword names as in :func:`serve`)."""
    return {name: p.default for name, p in inspect.signature(serve).parameters.items()}


def resolve_serve(params: dict[str, Any]) -> tuple[ServeOptions, EngineConfig, str]:
    """Turn ``serve`` parameters into server options, engine config and a start-up banner."""
    p = {**serve_defaults(), **params}
    check_numbers(p)
    if p["fail_start"] is not None:
        raise StartupError(p["fail_start"])
    flavor = p["flavor"]
    if flavor not in ("vllm", "trtllm"):
        raise UsageError("must be 'vllm' or 'trtllm'", "--flavor")
    if p["kv_offloading_backend"] != "native":
        raise StartupError(f"harness-sim: error: kv_offloading_backend {p['kv_offloading_backend']!r} is not "
                           "supported by the simulator (native only)")
    if p["time_scale"] <= 0:
        raise UsageError("must be positive", "--time-scale")
    if p["profile"] is not None and p["profile_file"] is not None:
        raise UsageError("give --profile or --profile-file, not both", "--profile")
    try:
        noise = NoiseSpec(seed=p["noise_seed"], step_jitter=p["step_jitter"], run_drift=p["run_drift"],
                          drift_per_hour=p["drift_per_hour"], disk_read_tail_prob=p["disk_read_tail_prob"],
                          disk_read_tail_factor=p["disk_read_tail_factor"])
        noise.validate()
        try:
            prof = load_profile(path=p["profile_file"]) if p["profile_file"] is not None else load_profile(
                p["profile"] or "demo")
        except ProfileFileError as exc:
            raise UsageError(safe_text(str(exc)), "--profile-file") from None
        cfg = build_engine_config(
            prof, flavor="trtllm" if flavor == "trtllm" else "vllm", model_name=p["model"],
            max_num_seqs=p["max_num_seqs"], max_num_batched_tokens=p["max_num_batched_tokens"],
            max_model_len=p["max_model_len"], block_size=p["block_size"],
            gpu_memory_utilization=p["gpu_memory_utilization"], enable_prefix_caching=p["enable_prefix_caching"],
            kv_offloading_size_gib=p["kv_offloading_size"], kv_transfer_config=p["kv_transfer_config"],
            host_cache_size=p["host_cache_size"], disk_tier_max_bytes=p["disk_tier_max_bytes"], seed=p["seed"],
            noise=noise,
        )
        faults = Faults(crash_after_s=p["crash_after_s"], crash_after_requests=p["crash_after_requests"],
                        stall_after_tokens=p["stall_after_tokens"], error_rate=p["error_rate"],
                        malformed_sse_rate=p["malformed_sse_rate"], disk_read_slowdown=p["disk_read_slowdown"])
        faults.validate()
    except (ProfileError, ConfigError, FaultError, NoiseError) as exc:
        raise StartupError(f"harness-sim: error: {exc}") from exc
    check_shm(p["shm_bytes"], cfg)
    names = tuple(p["served_model_name"]) if p["served_model_name"] else (p["model"],)
    gt = p["ground_truth"]
    opts = ServeOptions(host=p["host"], port=p["port"], flavor=flavor, served_names=names,
                        time_scale=p["time_scale"], startup_delay_s=p["startup_delay_s"],
                        ground_truth=str(gt) if gt else None, seed=p["seed"],
                        kv_offloading_size_gib=p["kv_offloading_size"], faults=faults, dev_mode=dev_mode_env())
    off = cfg.offload
    tier = "none"
    if off is not None and off.ignored_keys:
        print(f"harness-sim: warning: kv_connector_extra_config keys not modelled by the simulator (ignored): "
              f"{', '.join(off.ignored_keys)}", file=sys.stderr, flush=True)
    if off is not None:
        tier = f"{off.spec_name} cpu={off.cpu_bytes / 2**30:.2f} GiB ({off.eviction_policy}, {off.store_mode})"
        if off.fs is not None:
            tier += f" + fs {off.fs.root_dir}"
    banner = (
        f"harness-sim: SIMULATED {flavor} engine, profile {prof.name} ({prof.description}); "
        f"GPU KV cache: {cfg.num_gpu_blocks} blocks x {cfg.block_size} tokens = "
        f"{cfg.num_gpu_blocks * cfg.block_size} tokens; offload: {tier}; time scale {p['time_scale']}; "
        f"{describe(noise)}"
    )
    return opts, cfg, banner


def check_numbers(params: dict[str, Any]) -> None:
    """Every float option is a finite number (``nan`` and ``inf`` parse as floats), the CPU tier is positive and
    the connector JSON is not nested deeper than :data:`JSON_DEPTH_LIMIT`."""
    for name, value in params.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"must be a finite number (got {value!r})", "--" + name.replace("_", "-"))
    size = params.get("kv_offloading_size")
    if size is not None and size <= 0:
        raise UsageError(f"must be a positive number of GiB (got {size!r})", "--kv-offloading-size")
    transfer = params.get("kv_transfer_config")
    if isinstance(transfer, str) and json_too_deep(transfer):
        raise UsageError(f"the JSON nests deeper than {JSON_DEPTH_LIMIT} levels", "--kv-transfer-config")


SHM_PATH = "/dev/shm"


def check_shm(given: str | None, cfg: EngineConfig) -> None:
    """vLLM's start-up check (``check_shm_free_space`` in 0.32): the CPU tier is one shared mmap in /dev/shm."""
    off = cfg.offload
    if given is None or off is None or off.spec_name == "trtllm-host":
        return
    if given == "host":
        free = shutil.disk_usage(SHM_PATH).free if Path(SHM_PATH).is_dir() else None
    else:
        try:
            free = int(given)
        except ValueError:
            raise UsageError("must be a byte count or 'host'", "--shm-bytes") from None
    if free is not None and off.cpu_bytes > free:
        mib = 1 << 20
        raise StartupError(f"RuntimeError: Insufficient space in {SHM_PATH} for CPU KV offload shared region in "
                           f"{SHM_PATH}: {off.cpu_bytes / mib:.0f} MiB required, {free / mib:.0f} MiB free. Increase "
                           f"{SHM_PATH} (e.g. --shm-size or --ipc=host).")
