# mypy: ignore-errors
"""Runs INSIDE the engine's Python (the pinned vLLM image or a vLLM venv), never in the harness: checks each arm's
``vllm serve`` arguments with vLLM's own code and prints one ``KVH-VALIDATE {json}`` line per arm.

Input (stdin, JSON): ``{"arms": [{"arm": NAME, "args": [...]}]}`` -- the arguments after ``vllm serve``.
Stages, in vLLM's start-up order: parse (FlexibleArgumentParser + make_arg_parser), validate_parsed_serve_args,
AsyncEngineArgs.from_cli_args(...).create_engine_config(), then for an OffloadingConnector config the offloading spec
class, each secondary tier's class and its constructor keywords, the chunk arithmetic of CPUOffloadingSpec, and the
platform check of CPUOffloadingSpec.get_worker. Statuses: ok, platform (ok up to the platform's limit), rejected.
Standard library and vLLM only: this file is sent to the engine's interpreter as text.
"""

import contextlib
import inspect
import io
import json
import sys
import types

MARK = "KVH-VALIDATE "


def emit(arm, status, stage, message, **extra):
    print(MARK + json.dumps({"arm": arm, "status": status, "stage": stage, "message": message, **extra}),
          flush=True)


def last_lines(text, n=3):
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error:" in ln]
    return errors[-1] if errors else " ".join(lines[-n:])


def parse(args):
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return parser.parse_args(args), None
    except SystemExit:
        return None, last_lines(err.getvalue()) or "argument parsing failed"


def chunk_check(cfg, extra):
    """CPUOffloadingSpec's own arithmetic: how many chunks cpu_bytes_to_use holds (0 = nothing fits)."""
    import mmap

    model, par, cache = cfg.model_config, cfg.parallel_config, cfg.cache_config
    gpu_block = cache.block_size
    if not gpu_block:
        return None
    layers = model.get_num_layers(par)
    kv_heads = model.get_num_kv_heads(par)
    head = model.get_head_size()
    import torch
    from vllm.utils.torch_utils import STR_DTYPE_TO_TORCH_DTYPE

    dtype = model.dtype if cache.cache_dtype == "auto" else STR_DTYPE_TO_TORCH_DTYPE[cache.cache_dtype]
    elem = torch.tensor([], dtype=dtype).element_size()
    world = par.tensor_parallel_size * par.pipeline_parallel_size
    offload_block = int(extra.get("block_size") or gpu_block)
    per_block = 2 * layers * kv_heads * head * elem * gpu_block
    chunk = per_block * world * max(1, offload_block // gpu_block)
    aligned = -(-chunk // mmap.PAGESIZE) * mmap.PAGESIZE
    cpu_bytes = int(extra.get("cpu_bytes_to_use") or 0)
    return {"chunk_bytes": aligned, "num_chunks": cpu_bytes // aligned, "cpu_bytes_to_use": cpu_bytes}


def offload_checks(cfg):
    """The connector part; returns (status, stage, message, extra)."""
    ktc = cfg.kv_transfer_config
    if ktc is None or ktc.kv_connector != "OffloadingConnector":
        return "ok", "engine-config", "engine config built", {}
    from vllm.v1.kv_offload.factory import OffloadingSpecFactory

    extra = dict(ktc.kv_connector_extra_config or {})
    stage = "offloading-spec"
    try:
        spec_cls = OffloadingSpecFactory.get_spec_cls(extra)
        if not extra.get("cpu_bytes_to_use"):
            raise Exception("cpu_bytes_to_use must be specified in kv_connector_extra_config")
        tiers = extra.get("secondary_tiers") or []
        if tiers:
            stage = "secondary-tiers"
            from vllm.v1.kv_offload.tiering.factory import SecondaryTierFactory

            if not isinstance(tiers, list):
                raise ValueError("secondary_tiers must be a list of tier configurations")
            for tier in tiers:
                tier_cls = SecondaryTierFactory.get_tier_class(tier)
                kwargs = {k: v for k, v in tier.items() if k not in ("type", "module_path", "backpressure")}
                # The keywords SecondaryTierFactory.create_secondary_tier passes; bound to the constructor (not
                # called: a real fs tier creates root_dir and starts I/O threads).
                try:
                    inspect.signature(tier_cls).bind(offloading_spec=None, primary_kv_view=memoryview(b""),
                                                     tier_type=tier["type"], backpressure_detector=None, **kwargs)
                except TypeError as exc:
                    raise TypeError(f"{tier_cls.__name__}.__init__() {exc}") from None
        stage = "chunks"
        chunks = chunk_check(cfg, extra)
        if chunks is not None and chunks["num_chunks"] < 1:
            raise ValueError(f"cpu_bytes_to_use {chunks['cpu_bytes_to_use']} holds no offload chunk of "
                             f"{chunks['chunk_bytes']} bytes (CPUOffloadingSpec: num_chunks = cpu_bytes_to_use // "
                             "aligned chunk bytes = 0)")
    except Exception as exc:  # the engine's own message, whatever it raised
        return "rejected", stage, f"{type(exc).__name__}: {exc}", {}
    info = {"spec": spec_cls.__name__, **(chunks or {})}
    from vllm.platforms import current_platform

    if not (current_platform.is_cuda_alike() or current_platform.is_xpu()):
        try:
            spec_cls.get_worker(types.SimpleNamespace(_worker=None), None)
        except Exception as exc:
            return "platform", "platform", f"{type(exc).__name__}: {exc}", info
    return "ok", "offloading-spec", f"{spec_cls.__name__} accepted", info


def check(arm, args):
    ns, error = parse(args)
    if ns is None:
        return emit(arm, "rejected", "parse", error)
    if getattr(ns, "model_tag", None):  # `vllm serve MODEL`: what vllm/entrypoints/cli/serve.py does
        ns.model = ns.model_tag
    try:
        from vllm.entrypoints.launchers.cli_args import validate_parsed_serve_args

        validate_parsed_serve_args(ns)
    except Exception as exc:
        return emit(arm, "rejected", "serve-args", f"{type(exc).__name__}: {exc}")
    try:
        from vllm.engine.arg_utils import AsyncEngineArgs

        cfg = AsyncEngineArgs.from_cli_args(ns).create_engine_config()
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}"
        return emit(arm, "rejected", "engine-config", " ".join(text.split())[:2000])
    status, stage, message, info = offload_checks(cfg)
    if status != "rejected" and message == "engine config built":
        message = f"engine config built (block_size {cfg.cache_config.block_size})"
    emit(arm, status, stage, message, **info)


def main():
    request = json.load(sys.stdin)
    try:
        import vllm
        version = getattr(vllm, "__version__", "unknown")
    except Exception as exc:
        print(MARK + json.dumps({"fatal": f"cannot import vllm: {type(exc).__name__}: {exc}"}), flush=True)
        return
    print(MARK + json.dumps({"engine_version": version}), flush=True)
    for item in request["arms"]:
        try:
            check(item["arm"], item["args"])
        except BaseException as exc:  # one arm's surprise must not hide the others
            emit(item["arm"], "error", "harness-check", f"{type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main()
