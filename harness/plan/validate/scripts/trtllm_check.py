# mypy: ignore-errors
"""Runs INSIDE the pinned TensorRT-LLM image (``docker run --rm --entrypoint python3 IMAGE -c ...``; no GPU needed):
checks each arm's rendered extra-options YAML with that release's own pydantic models and its CLI flags against
``trtllm-serve --help``. Prints one ``KVH-VALIDATE {json}`` line per arm.

Input (stdin, JSON): ``{"arms": [{"arm": NAME, "yaml": TEXT, "model": MODEL, "flags": ["--tp_size", ...]}]}``.
Stages: kv_cache_config (KvCacheConfig(**...): extra fields are forbidden), llm_args (the PyTorch backend's
TorchLlmArgs, else LlmArgs, validated with the YAML's top-level keys; only "extra fields" errors are reported, since a
model that is not downloaded is not a config error), flags (each flag the harness passes appears in the help text).
UNCONFIRMED: written against TensorRT-LLM's documented module layout; not run against an image yet.
"""

import json
import re
import subprocess
import sys

MARK = "KVH-VALIDATE "


def emit(arm, status, stage, message, **extra):
    print(MARK + json.dumps({"arm": arm, "status": status, "stage": stage, "message": message, **extra}),
          flush=True)


def llm_args_class():
    from tensorrt_llm.llmapi import llm_args

    for name in ("TorchLlmArgs", "LlmArgs"):
        cls = getattr(llm_args, name, None)
        if cls is not None:
            return cls
    raise ImportError("tensorrt_llm.llmapi.llm_args has neither TorchLlmArgs nor LlmArgs")


def extra_errors(exc):
    """The 'Extra inputs are not permitted' (and other non-model) errors of a pydantic ValidationError."""
    found = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()))
        if err.get("type") == "extra_forbidden" or "extra" in str(err.get("msg", "")).lower():
            found.append(f"{loc}: {err.get('msg')}")
    return found


def help_flags():
    text = ""
    for cmd in (["trtllm-serve", "serve", "--help"], ["trtllm-serve", "--help"]):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        text += out.stdout + out.stderr
    return set(re.findall(r"(--[A-Za-z0-9][A-Za-z0-9_-]*)", text)), bool(text.strip())


def check(item, flags_known, have_help):
    import yaml

    arm = item["arm"]
    doc = yaml.safe_load(item["yaml"]) or {}
    try:
        from tensorrt_llm.llmapi import KvCacheConfig

        KvCacheConfig(**(doc.get("kv_cache_config") or {}))
    except Exception as exc:
        return emit(arm, "rejected", "kv_cache_config", f"{type(exc).__name__}: {exc}")
    cls = llm_args_class()
    top = {k: v for k, v in doc.items() if k != "kv_cache_config"}
    try:
        cls(model=item["model"], **top)
    except Exception as exc:
        errors = extra_errors(exc) if hasattr(exc, "errors") else []
        if errors:
            return emit(arm, "rejected", "llm_args", f"{cls.__name__}: " + "; ".join(errors))
    unknown = [f for f in item["flags"] if have_help and f not in flags_known]
    if unknown:
        return emit(arm, "rejected", "flags", f"trtllm-serve --help does not list {', '.join(unknown)}")
    emit(arm, "ok", "flags" if have_help else "llm_args",
         "accepted" + ("" if have_help else " (trtllm-serve --help gave no output: flags not checked)"))


def main():
    request = json.load(sys.stdin)
    try:
        import tensorrt_llm

        version = getattr(tensorrt_llm, "__version__", "unknown")
    except Exception as exc:
        print(MARK + json.dumps({"fatal": f"cannot import tensorrt_llm: {type(exc).__name__}: {exc}"}), flush=True)
        return
    print(MARK + json.dumps({"engine_version": version}), flush=True)
    flags_known, have_help = help_flags()
    for item in request["arms"]:
        try:
            check(item, flags_known, have_help)
        except BaseException as exc:
            emit(item["arm"], "error", "harness-check", f"{type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main()
