# mypy: ignore-errors
"""Runs INSIDE the engine's Python (the pinned vLLM image or a vLLM venv), never in the harness: puts each arm's
``vllm serve`` arguments through vLLM's own start-up code and prints one ``KVH-VALIDATE {json}`` line per arm with
what vLLM resolved.

Input (stdin, JSON): ``{"arms": [{"arm": NAME, "args": [...]}]}`` -- the arguments after ``vllm serve``.
Stages, in vLLM's start-up order: ``platform`` (resolved once; an undetected platform is forced to the one the build
was made for, and said), ``parse`` (FlexibleArgumentParser + make_arg_parser), ``serve-args``
(validate_parsed_serve_args), ``engine-config`` (AsyncEngineArgs.from_cli_args(...).create_engine_config()); for an
OffloadingConnector: ``offloading-config`` (build_offloading_config over a KV cache config at the TARGET platform's
block size), ``offloading-spec`` (OffloadingSpecFactory.create_spec), ``offload-manager`` (the spec's get_manager():
the CPU manager and every secondary tier's constructor, on a two-chunk copy whose tier directories are in a scratch
directory of this sandbox, shut down after), then the platform check of the spec's get_worker. Statuses: ok,
platform (ok up to this platform's limit), rejected (vLLM's own message), not-checked.
Standard library and vLLM only: this file is sent to the engine's interpreter as text.
"""

import contextlib
import copy
import dataclasses
import io
import json
import os
import shutil
import sys
import tempfile
import types
import uuid

MARK = "KVH-VALIDATE "
PLATFORM = {"detected": None, "used": None, "forced": False}


def say(item):
    print(MARK + json.dumps(item, default=str), flush=True)


def emit(arm, status, stage, message, **extra):
    say({"arm": arm, "status": status, "stage": stage, "message": message, **extra})


def words(exc):
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:2000]


def resolve_platform():
    """vLLM's own platform detection; an undetected platform is forced to the build's (as vLLM's tests patch it)."""
    from vllm import platforms
    from vllm.utils.import_utils import resolve_obj_by_qualname

    qual = platforms.resolve_current_platform_cls_qualname()
    PLATFORM["detected"] = qual.rsplit(".", 1)[-1]
    if qual.endswith("UnspecifiedPlatform"):
        import torch

        if getattr(torch.version, "cuda", None):
            qual = "vllm.platforms.cuda.CudaPlatform"
        elif getattr(torch.version, "hip", None):
            qual = "vllm.platforms.rocm.RocmPlatform"
        else:
            qual = platforms.cpu_platform_plugin() or qual
        if qual.endswith("UnspecifiedPlatform"):
            return "vLLM detected no platform (UnspecifiedPlatform) and the build names none to force"
        PLATFORM["forced"] = True
    platforms._current_platform = resolve_obj_by_qualname(qual)()
    PLATFORM["used"] = type(platforms._current_platform).__name__
    return None


def parse(args):
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return parser.parse_args(args), None
    except SystemExit:
        lines = [ln.strip() for ln in err.getvalue().splitlines() if ln.strip()]
        errors = [ln for ln in lines if "error:" in ln]
        return None, (errors[-1] if errors else " ".join(lines[-3:])) or "argument parsing failed"


def engine_fields(cfg, ns):
    """The parsed values the harness manages or every arm must share."""
    model, cache, par, sched = cfg.model_config, cfg.cache_config, cfg.parallel_config, cfg.scheduler_config
    served = model.served_model_name
    return {
        "model": model.model, "served_model_name": served[0] if isinstance(served, list) else served,
        "max_model_len": model.max_model_len, "dtype": str(model.dtype).removeprefix("torch."),
        "tensor_parallel_size": par.tensor_parallel_size, "pipeline_parallel_size": par.pipeline_parallel_size,
        "data_parallel_size": par.data_parallel_size, "gpu_memory_utilization": cache.gpu_memory_utilization,
        "max_num_seqs": sched.max_num_seqs, "max_num_batched_tokens": sched.max_num_batched_tokens,
        "enable_prefix_caching": cache.enable_prefix_caching, "cache_dtype": str(cache.cache_dtype),
        "block_size": cache.block_size, "user_block_size": bool(cache.user_specified_block_size),
        "kv_offloading_size_gib": cache.kv_offloading_size, "kv_offloading_backend": cache.kv_offloading_backend,
        "enable_prompt_tokens_details": bool(getattr(ns, "enable_prompt_tokens_details", False)),
        "host": getattr(ns, "host", None), "port": getattr(ns, "port", None),
    }


def target_block(cfg):
    """(tokens per GPU KV block on the target GPU, where that figure comes from) -- or (None, why not)."""
    from vllm.config.cache import CacheConfig

    cache, model = cfg.cache_config, cfg.model_config
    if cache.user_specified_block_size:
        return cache.block_size, "--block-size"
    if getattr(model, "use_mla", False) or getattr(model, "is_hybrid", False):
        return None, "MLA or hybrid model: its CUDA block size depends on the attention backend (not computed)"
    return CacheConfig.DEFAULT_BLOCK_SIZE, ("vLLM's CacheConfig.DEFAULT_BLOCK_SIZE, which the CUDA platform keeps "
                                            "for a full-attention model (FlashAttention)")


def kv_cache_config(cfg, block):
    """One full-attention group over every layer, as the GPU worker would report it (per rank)."""
    from vllm.utils.torch_utils import STR_DTYPE_TO_TORCH_DTYPE
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec

    model, par, cache = cfg.model_config, cfg.parallel_config, cfg.cache_config
    dtype = model.dtype if cache.cache_dtype == "auto" else STR_DTYPE_TO_TORCH_DTYPE[cache.cache_dtype]
    spec = FullAttentionSpec(block_size=block, num_kv_heads=model.get_num_kv_heads(par),
                             head_size=model.get_head_size(), dtype=dtype)
    layers = [f"model.layers.{i}.self_attn.attn" for i in range(model.get_num_layers(par))]
    return KVCacheConfig(num_blocks=1, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(layers, spec)])


def build_manager(spec_factory, config, chunk_bytes, scratch):
    """get_manager() on a two-chunk copy whose tier directories are in the scratch directory; shut down after."""
    extra = copy.deepcopy(dict(config.extra_config))
    extra["cpu_bytes_to_use"] = 2 * max(chunk_bytes, 1)
    for i, tier in enumerate(extra.get("secondary_tiers") or []):
        if isinstance(tier, dict) and "root_dir" in tier:
            tier["root_dir"] = os.path.join(scratch, f"tier-{i}")
    mini = dataclasses.replace(config, extra_config=extra, engine_id=f"kvh-validate-{uuid.uuid4().hex}")
    manager = spec_factory.create_spec(mini).get_manager()
    with contextlib.suppress(Exception):
        if hasattr(manager, "shutdown"):
            manager.shutdown()
    return type(manager).__name__


def offload(cfg, scratch):
    """The connector part: (status, stage, message, resolved offload dict or None)."""
    ktc = cfg.kv_transfer_config
    if ktc is None or not ktc.kv_connector:
        return "ok", "engine-config", "engine config built, no KV connector", None
    extra = dict(ktc.kv_connector_extra_config or {})
    info = {"connector": ktc.kv_connector, "role": ktc.kv_role, "extra_config": extra}
    if ktc.kv_connector != "OffloadingConnector":
        return "ok", "engine-config", f"engine config built with connector {ktc.kv_connector}", info
    block, source = target_block(cfg)
    info.update(target_block_size=block, target_block_source=source, platform_block_size=cfg.cache_config.block_size)
    from vllm.distributed.kv_transfer.kv_connector.v1.offloading.config import build_offloading_config
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory

    stage = "offloading-spec"
    try:
        spec_cls = OffloadingSpecFactory.get_spec_cls(extra)
        info["spec"] = spec_cls.__name__
        if block is None:
            return "ok", "offloading-spec", f"{spec_cls.__name__} found; chunk figures not computed: {source}", info
        target = copy.deepcopy(cfg)
        target.cache_config.block_size = block
        stage = "offloading-config"
        config = build_offloading_config(target, kv_cache_config(target, block))
        stage = "offloading-spec"
        spec = OffloadingSpecFactory.create_spec(config)
        info.update(blocks_per_chunk=spec.blocks_per_chunk, tokens_per_chunk=spec.blocks_per_chunk * block,
                    chunk_bytes=spec.kv_bytes_per_chunk, num_chunks=spec.num_chunks,
                    cpu_bytes_to_use=int(extra.get("cpu_bytes_to_use") or 0),
                    eviction_policy=getattr(spec, "eviction_policy", None),
                    store_threshold=int(extra.get("store_threshold", 0) or 0),
                    tiers=[{k: v for k, v in t.items()} for t in (getattr(spec, "secondary_tier_configs", None)
                                                                  or [])])
        stage = "offload-manager"
        info["manager"] = build_manager(OffloadingSpecFactory, config, spec.kv_bytes_per_chunk, scratch)
    except Exception as exc:  # vLLM's own message, whatever it raised
        return "rejected", stage, words(exc), info
    from vllm.platforms import current_platform

    if not (current_platform.is_cuda_alike() or current_platform.is_xpu()):
        try:
            spec_cls.get_worker(types.SimpleNamespace(_worker=None), None)
        except Exception as exc:
            return "platform", "platform", words(exc), info
    return "ok", "offload-manager", f"{spec_cls.__name__} and {info['manager']} built", info


def check(arm, args, scratch):
    ns, error = parse(args)
    if ns is None:
        return emit(arm, "rejected", "parse", error)
    if getattr(ns, "model_tag", None):  # `vllm serve MODEL`: what vllm/entrypoints/cli/serve.py does
        ns.model = ns.model_tag
    try:
        from vllm.entrypoints.launchers.cli_args import validate_parsed_serve_args

        validate_parsed_serve_args(ns)
    except Exception as exc:
        return emit(arm, "rejected", "serve-args", words(exc))
    try:
        from vllm.engine.arg_utils import AsyncEngineArgs

        cfg = AsyncEngineArgs.from_cli_args(ns).create_engine_config()
    except Exception as exc:
        if PLATFORM["forced"]:  # the forced platform may be what failed: not the arm's fault
            return emit(arm, "not-checked", "engine-config", f"with the platform forced to {PLATFORM['used']}: "
                        f"{words(exc)}")
        return emit(arm, "rejected", "engine-config", words(exc))
    status, stage, message, info = offload(cfg, os.path.join(scratch, arm))
    emit(arm, status, stage, message, resolved={"engine": engine_fields(cfg, ns), "offload": info,
                                                "platform": dict(PLATFORM)})


def main():
    request = json.load(sys.stdin)
    try:
        import vllm

        version = getattr(vllm, "__version__", "unknown")
        problem = resolve_platform()
    except Exception as exc:
        return say({"fatal": f"cannot set up vllm: {words(exc)}"})
    if problem:
        return say({"fatal": problem})
    say({"engine_version": version, "platform": dict(PLATFORM)})
    scratch = tempfile.mkdtemp(prefix="kvh-validate-")
    try:
        for item in request["arms"]:
            try:
                check(item["arm"], item["args"], scratch)
            except BaseException as exc:  # one arm's surprise must not hide the others
                emit(item["arm"], "error", "harness-check", words(exc))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
