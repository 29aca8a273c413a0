"""Per-engine requests for the in-engine scripts: what each arm sends, and the model substitution.

vLLM: the arguments after the entrypoint (``vllm serve MODEL ...`` or ``-m ...api_server --model MODEL ...``), with
the model replaced by a local directory holding its ``config.json`` when the model is a hub id the check cannot
download (``AsyncEngineArgs.from_cli_args`` reads it). TensorRT-LLM: the rendered extra-options YAML, the model and
the flags passed to ``trtllm-serve``.
"""

from __future__ import annotations

from typing import Any

from harness.config.engine import EngineSpec
from harness.engines.spec import LaunchSpec
from harness.engines.trtllm_versions import choose_release, release_facts

SCRIPTS = {"vllm": "vllm_check.py", "trtllm": "trtllm_check.py"}


def replace_model(args: list[str], model: str) -> list[str]:
    """The arguments with the model (``--model X``, ``--model=X`` or the leading positional) replaced."""
    out = list(args)
    for i, arg in enumerate(out):
        if arg == "--model" and i + 1 < len(out):
            out[i + 1] = model
            return out
        if arg.startswith("--model="):
            out[i] = f"--model={model}"
            return out
    if out and not out[0].startswith("-"):
        out[0] = model
    return out


def vllm_item(spec: LaunchSpec, model: str | None) -> dict[str, Any]:
    """One vLLM arm: the serve arguments (model substituted when asked)."""
    args = list(spec.args)
    return {"arm": spec.arm, "args": replace_model(args, model) if model else args}


def trtllm_item(spec: LaunchSpec, model: str | None, engine: EngineSpec | None = None) -> dict[str, Any]:
    """One TensorRT-LLM arm: the rendered YAML, the model, the flags, and the facts its table entry assumes (which
    the check compares with the image's)."""
    content = spec.config_files[0].content if spec.config_files else ""
    flags = sorted({a.split("=", 1)[0] for a in spec.args if a.startswith("--")})
    item: dict[str, Any] = {"arm": spec.arm, "yaml": content, "model": model or (spec.args[0] if spec.args else ""),
                            "flags": flags}
    if engine is not None:
        item["table"] = release_facts(choose_release(engine))
    return item


def request_item(spec: LaunchSpec, model: str | None, engine: EngineSpec) -> dict[str, Any]:
    """The request entry for one arm of either engine."""
    return vllm_item(spec, model) if spec.engine == "vllm" else trtllm_item(spec, model, engine)
