# mypy: ignore-errors
"""Runs INSIDE the pinned TensorRT-LLM image (``docker run --rm --entrypoint python3 IMAGE -c ...``; no GPU needed):
checks each arm's rendered extra-options YAML with that release's own pydantic models and its CLI flags against
``trtllm-serve --help``. Prints one ``KVH-VALIDATE {json}`` line per arm.

Input (stdin, JSON): ``{"arms": [{"arm": NAME, "yaml": TEXT, "model": MODEL, "flags": ["--tp_size", ...]}]}``.
Stages: version-table (the facts this image shows -- ``tensorrt_llm.__version__``, whether its LlmArgs has
``return_perf_metrics`` and its KvCacheConfig ``tokens_per_block``, whether its ``serve/openai_server.py`` mounts
``/prometheus/metrics``, runs the background ``_iteration_stats_collector_loop`` and serves JSON ``/metrics`` from the
collector's tee buffer ``_iteration_stats_buffer`` -- compared with the table entry the harness chose, which the
rendered YAML carries on its ``# harness-release-facts: {json}`` comment lines; any mismatch is ``rejected`` naming the
fact), kv_cache_config (KvCacheConfig(**...): extra fields are forbidden), llm_args (the PyTorch backend's
TorchLlmArgs, else LlmArgs, validated with the YAML's top-level keys; only "extra fields" errors are reported, since a
model that is not downloaded is not a config error), flags (each flag the harness passes appears in the help text).
Every arm's line carries ``facts`` (what the image shows; None where it cannot tell) and ``table`` (the entry's).
Standard library and tensorrt_llm only (plus the yaml module the image ships): this text is sent to the engine's
interpreter. UNCONFIRMED: written against TensorRT-LLM's documented module layout; not run against an image yet.
"""

import json
import os
import re
import subprocess
import sys

MARK = "KVH-VALIDATE "
TABLE = "harness/engines/trtllm-versions.yaml"
_VERSION_RE = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


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


def version_key(text):
    """``1.1.0rc5`` -> (1, 1, 0); None when the text names no release."""
    match = _VERSION_RE.search(text or "")
    return tuple(int(g) for g in match.groups(default="0")) if match else None


def _fields(cls):
    fields = getattr(cls, "model_fields", None)
    if fields is None:
        fields = getattr(cls, "__fields__", None)
    return set(fields) if fields is not None else None


def image_facts():
    """What this image's TensorRT-LLM shows about the facts the version table records (None: cannot tell)."""
    import tensorrt_llm

    facts = {"version": str(getattr(tensorrt_llm, "__version__", "") or "") or None, "return_perf_metrics": None,
             "tokens_per_block": None, "prometheus_route": None, "stats_collector": None,
             "collector_tee_buffer": None, "openai_server": None}
    try:
        fields = _fields(llm_args_class())
        facts["return_perf_metrics"] = None if fields is None else "return_perf_metrics" in fields
    except Exception:
        pass
    try:
        from tensorrt_llm.llmapi import KvCacheConfig

        fields = _fields(KvCacheConfig)
        facts["tokens_per_block"] = None if fields is None else "tokens_per_block" in fields
    except Exception:
        pass
    path = os.path.join(os.path.dirname(os.path.abspath(tensorrt_llm.__file__)), "serve", "openai_server.py")
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return facts
    facts["openai_server"] = path
    facts["prometheus_route"] = "/prometheus/metrics" in text
    facts["stats_collector"] = "_iteration_stats_collector_loop" in text
    facts["collector_tee_buffer"] = facts["stats_collector"] and "_iteration_stats_buffer" in text
    return facts


def _has(flag):
    return "has" if flag else "lacks"


def table_mismatches(table, facts):
    """Each fact where the image contradicts the chosen table entry, in words (empty: they agree)."""
    out = []
    entry = table.get("entry")
    actual = version_key(facts.get("version"))
    low, high = version_key(entry), version_key(table.get("covers_below"))
    if actual is not None and low is not None and (actual < low or (high is not None and actual >= high)):
        span = f"{entry} up to {table.get('covers_below')}" if high is not None else f"{entry} and later"
        out.append(f"tensorrt_llm.__version__ is {facts.get('version')}, outside the releases entry {entry} covers "
                   f"({span}; the scenario named {table.get('requested') or 'no release'})")
    want = table.get("return_perf_metrics")
    have = facts.get("return_perf_metrics")
    if want is not None and have is not None and bool(want) != have:
        out.append(f"return_perf_metrics: the table says LlmArgs {_has(want)} it, this image's LlmArgs {_has(have)} it")
    want = table.get("tokens_per_block")
    have = facts.get("tokens_per_block")
    if want is not None and have is not None and bool(want) != have:
        out.append(f"tokens_per_block: the table says KvCacheConfig {_has(want)} it, this image's "
                   f"KvCacheConfig {_has(have)} it")
    want = table.get("prometheus_route")
    have = facts.get("prometheus_route")
    if "prometheus_route" in table and have is not None and bool(want) != have:
        out.append(f"Prometheus route: the table says {want or 'none'}, this image's openai_server.py "
                   + ("mounts /prometheus/metrics" if have else "has no /prometheus/metrics"))
    want = table.get("collector_drains_json")
    collector = facts.get("stats_collector")
    if want is not None and collector is not None:
        drains = bool(collector) and not facts.get("collector_tee_buffer")
        if bool(want) != drains:
            if want:
                why = ("runs the collector but serves JSON /metrics from its tee buffer (_iteration_stats_buffer, "
                       "PR #13405), so JSON /metrics can be polled" if collector else
                       "runs no background stats collector (_iteration_stats_collector_loop), so JSON /metrics can "
                       "be polled")
                out.append(f"background stats collector: the table says it drains JSON /metrics (the harness reads "
                           f"Prometheus only), but this image {why}")
            else:
                out.append("background stats collector: the table says nothing drains JSON /metrics, but this "
                           "image's openai_server.py runs _iteration_stats_collector_loop with no tee buffer: it "
                           "drains the queue JSON /metrics reads, so polling both starves one reader "
                           "(nvbugs/6102381)")
    return out


def help_flags():
    text = ""
    for cmd in (["trtllm-serve", "serve", "--help"], ["trtllm-serve", "--help"]):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        text += out.stdout + out.stderr
    return set(re.findall(r"(--[A-Za-z0-9][A-Za-z0-9_-]*)", text)), bool(text.strip())


def check(item, flags_known, have_help, facts):
    import yaml

    arm = item["arm"]
    table = item.get("table") or None
    seen = {"facts": facts, "table": table}
    if table is not None:
        wrong = table_mismatches(table, facts)
        if wrong:
            return emit(arm, "rejected", "version-table",
                        f"table entry {table.get('entry')} ({TABLE}) does not match this image (tensorrt_llm "
                        f"{facts.get('version') or 'unknown'}): " + "; ".join(wrong)
                        + "; correct the entry, or add one for this release", **seen)
    doc = yaml.safe_load(item["yaml"]) or {}
    try:
        from tensorrt_llm.llmapi import KvCacheConfig

        kv = doc.get("kv_cache_config") or {}
        known = _fields(KvCacheConfig)
        stray = sorted(k for k in kv if known is not None and k not in known)
        if stray:  # a release whose KvCacheConfig ignores unknown keys (no extra="forbid") would drop them silently
            return emit(arm, "rejected", "kv_cache_config",
                        f"KvCacheConfig has no field {', '.join(stray)} in this image", **seen)
        KvCacheConfig(**kv)
    except Exception as exc:
        return emit(arm, "rejected", "kv_cache_config", f"{type(exc).__name__}: {exc}", **seen)
    cls = llm_args_class()
    top = {k: v for k, v in doc.items() if k != "kv_cache_config"}
    try:
        cls(model=item["model"], **top)
    except Exception as exc:
        errors = extra_errors(exc) if hasattr(exc, "errors") else []
        if errors:
            return emit(arm, "rejected", "llm_args", f"{cls.__name__}: " + "; ".join(errors), **seen)
    unknown = [f for f in item["flags"] if have_help and f not in flags_known]
    if unknown:
        return emit(arm, "rejected", "flags", f"trtllm-serve --help does not list {', '.join(unknown)}", **seen)
    agreed = "" if table is None else f"; table entry {table.get('entry')} matches the image's facts"
    emit(arm, "ok", "flags" if have_help else "llm_args",
         "accepted" + ("" if have_help else " (trtllm-serve --help gave no output: flags not checked)") + agreed,
         **seen)


def main():
    request = json.load(sys.stdin)
    try:
        import tensorrt_llm

        version = getattr(tensorrt_llm, "__version__", "unknown")
    except Exception as exc:
        print(MARK + json.dumps({"fatal": f"cannot import tensorrt_llm: {type(exc).__name__}: {exc}"}), flush=True)
        return
    try:
        facts = image_facts()
    except Exception as exc:
        facts = {"version": version, "error": f"{type(exc).__name__}: {exc}"}
    print(MARK + json.dumps({"engine_version": version, "facts": facts}), flush=True)
    flags_known, have_help = help_flags()
    for item in request["arms"]:
        try:
            check(item, flags_known, have_help, facts)
        except BaseException as exc:
            emit(item["arm"], "error", "harness-check", f"{type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main()
