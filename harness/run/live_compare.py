"""The one-dimension guard on live servers: compare what a server reports (:mod:`harness.run.live_config`) with
what the scenario declares for its arm, and with the baseline's server.

Each compared field is a :class:`~harness.decision.live_config.Finding`: ``match``; ``mismatch`` (the arm is not judged:
"declared CPU tier 16 GiB, the live server reports 8 GiB (vllm:cache_config_info kv_offloading_size=8)"); ``warn``
(reported, not refused: a GPU KV cache of another size than the baseline's, two arms that look like one server);
``unverified`` (the server does not expose the field: said plainly, never counted as a match).

Declared: the model (served id, ``root``), ``max_model_len``, the CPU tier (``kv_offloading_size`` and backend for
``vllm-native``; a connector's ``cpu_bytes_to_use`` only where the server shows a size), the disk tier (``fs`` tier
labels of ``vllm:kv_offload_tiering_*``), prefix caching, ``gpu_memory_utilization`` and ``--block-size`` in
``extra_args``, ``max_num_seqs`` / ``max_num_batched_tokens`` where a ``vllm:*_config_info`` family carries them
(otherwise an explicit ``unverified``). Against the baseline's live server: block size, cache dtype,
``max_model_len`` when not declared, GPU KV blocks (warn).
"""

from __future__ import annotations

import math

from harness.config.arms import GIB, Arm, NoOffload, VllmConnectorOffload, VllmNativeOffload
from harness.config.engine import EngineSpec
from harness.decision.live_config import Finding
from harness.plan.checks.flags import vllm_name
from harness.run.live_config import CACHE_INFO, LiveConfig

TRTLLM_NOTE = ("TensorRT-LLM has no configuration endpoint (trtllm-serve serves /v1/models, /health, /metrics "
               "iteration stats and /version only)")
BASELINE_KEYS = (("block size", "block_size"), ("cache dtype", "cache_dtype"))
SCHEDULER_KEYS = ("max_num_seqs", "max_num_batched_tokens")


def flavor_of(engine: EngineSpec) -> str:
    """Whose endpoints the arm's server speaks: ``vllm`` or ``trtllm``."""
    if engine.kind == "trtllm" or (engine.kind == "sim" and engine.sim_flavor == "trtllm"):
        return "trtllm"
    return "vllm"


def _same(name: str, declared: str, live: str | None, source: str) -> Finding:
    if live is None:
        return Finding(name, "unverified", declared, "not exposed", source + " not exposed")
    return Finding(name, "match" if declared == live else "mismatch", declared, live, f"{source}={live}")


def _gib(label: str | None) -> float | None:
    """``kv_offloading_size`` in GiB (``None``/absent: no CPU tier); raises ValueError on other text."""
    return None if label in (None, "", "None") else float(str(label))


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


def _model(engine: EngineSpec, live: LiveConfig) -> list[Finding]:
    served = engine.name_served
    ids = [str(m.get("id")) for m in live.models]
    entry = live.model(served)
    if entry is None:
        return [Finding("served model", "mismatch", served, ", ".join(ids) or "no models", "/v1/models ids")]
    out = [Finding("served model", "match", served, served, "/v1/models id")]
    root = entry.get("root")
    out.append(_same("model", engine.model, None if root is None else str(root), "/v1/models root"))
    if engine.max_model_len is not None:
        mml = entry.get("max_model_len")
        out.append(_same("max_model_len", str(engine.max_model_len), None if mml is None else str(mml),
                         "/v1/models max_model_len"))
    return out


def _cpu_tier(arm: Arm, live: LiveConfig, cc: dict[str, str]) -> list[Finding]:
    label = cc.get("kv_offloading_size")
    source = f"{CACHE_INFO} kv_offloading_size={label}"
    try:
        size = _gib(label)
    except ValueError:
        return [Finding("CPU tier", "unverified", _declared_tier(arm), str(label), f"{source} is not a number")]
    shown = "no CPU tier" if size is None else f"{size:g} GiB"
    off = arm.offload
    if isinstance(off, NoOffload):
        if size is not None:
            return [Finding("CPU tier", "mismatch", "none", shown, source)]
        if live.offload_families:
            return [Finding("CPU tier", "mismatch", "none", "an offload connector",
                            f"{live.offload_families[0]} and other vllm:kv_offload_* series are exposed")]
        return [Finding("CPU tier", "match", "none", "none", source)]
    declared = _declared_tier(arm)
    if isinstance(off, VllmNativeOffload):
        match = size is not None and _close(size, off.kv_offloading_size_gib)
        out = [Finding("CPU tier", "match" if match else "mismatch", declared, shown, source)]
        if size is not None:  # a backend label on a server without a CPU tier is vLLM's default, not a tier's
            out.append(_same("CPU tier backend", off.kv_offloading_backend, cc.get("kv_offloading_backend"),
                             f"{CACHE_INFO} kv_offloading_backend"))
        return out
    if isinstance(off, VllmConnectorOffload) and size is not None:  # given as --kv-offloading-size instead
        match = _close(size, off.cpu_bytes_to_use / GIB)
        return [Finding("CPU tier", "match" if match else "mismatch", declared, shown, source)]
    if live.offload_families:
        return [Finding("CPU tier", "unverified", declared, "an offload connector",
                        "vllm:kv_offload_* series show a connector; its kv_transfer_config (cpu_bytes_to_use) is "
                        "not exposed")]
    return [Finding("CPU tier", "unverified", declared, "not exposed",
                    "no vllm:kv_offload_* series yet and kv_transfer_config is not exposed")]


def _declared_tier(arm: Arm) -> str:
    size = arm.cpu_tier_bytes()
    return f"{size / GIB:g} GiB" if size else "none"


def _disk_tier(arm: Arm, live: LiveConfig) -> Finding:
    declared = ", ".join(t.root_dir for t in arm.fs_tiers()) or "none"
    fs = [t for t in live.tiers if t.endswith(":fs") or t == "fs"]
    source = "tier labels of vllm:kv_offload_tiering_*"
    if fs:
        return Finding("disk tier", "match" if arm.fs_tiers() else "mismatch", declared, ", ".join(fs), source)
    if arm.fs_tiers():
        return Finding("disk tier", "unverified", declared, "not exposed",
                       f"no fs tier in the {source} (the directory is not exposed either)")
    return Finding("disk tier", "match", "none", "none", f"no fs tier in the {source}")


def _block_flag(engine: EngineSpec) -> str | None:
    """The ``--block-size`` in extra_args as vLLM's parser reads it (``_`` for ``-``, an abbreviation; last wins)."""
    args = engine.extra_args
    found = None
    for i, arg in enumerate(args):
        name = vllm_name(arg)
        if not (name.startswith("--bl") and "--block-size".startswith(name)):
            continue
        if "=" in arg:
            found = arg.split("=", 1)[1]
        elif i + 1 < len(args):
            found = args[i + 1]
    return found


def _vllm_cache(arm: Arm, engine: EngineSpec, live: LiveConfig, cc: dict[str, str]) -> list[Finding]:
    out = _cpu_tier(arm, live, cc)
    out.append(_disk_tier(arm, live))
    out.append(_same("prefix caching", str(engine.enable_prefix_caching), cc.get("enable_prefix_caching"),
                     f"{CACHE_INFO} enable_prefix_caching"))
    util = cc.get("gpu_memory_utilization")
    try:
        same = util is not None and _close(float(util), engine.gpu_memory_utilization)
    except ValueError:
        same = False
    out.append(Finding("GPU memory utilization", "match" if same else "mismatch", repr(engine.gpu_memory_utilization),
                       str(util), f"{CACHE_INFO} gpu_memory_utilization={util}") if util is not None else
               _same("GPU memory utilization", repr(engine.gpu_memory_utilization), None, CACHE_INFO))
    block = _block_flag(engine)
    if block is not None:
        out.append(_same("block size", block, cc.get("block_size"), f"{CACHE_INFO} block_size"))
    return out


def _scheduler(engine: EngineSpec, live: LiveConfig) -> list[Finding]:
    """The declared scheduler limits: compared where a ``vllm:*_config_info`` family carries them, otherwise said
    to be not verifiable (vLLM 0.32 puts no scheduler setting on /metrics; TensorRT-LLM has no config endpoint)."""
    out: list[Finding] = []
    for key in SCHEDULER_KEYS:
        declared = getattr(engine, key)
        if declared is None:
            continue
        found = next(((name, labels[key]) for name, labels in live.config_info.items() if key in labels), None)
        if found is not None:
            out.append(_same(key, str(declared), found[1], f"{found[0]} {key}"))
        elif live.flavor == "trtllm":
            out.append(Finding(key, "unverified", str(declared), "not exposed", TRTLLM_NOTE))
        else:
            out.append(Finding(key, "unverified", str(declared), "not exposed",
                               f"no vllm:*_config_info on the metrics endpoint carries {key} (the server's "
                               "scheduler settings are not exposed)"))
    return out


def _against(name: str, engine: EngineSpec, live: LiveConfig, ref: LiveConfig) -> list[Finding]:
    """The fields every arm's server must share with the baseline's (``name``)."""
    out: list[Finding] = []
    mine, theirs = live.cache_config or {}, ref.cache_config or {}
    for label, key in BASELINE_KEYS:
        if key in mine and key in theirs and mine[key] != theirs[key]:
            out.append(Finding(label, "mismatch", f"{theirs[key]} (as {name}'s server)", mine[key],
                               f"{CACHE_INFO} {key}={mine[key]}"))
    if "num_gpu_blocks" in mine and "num_gpu_blocks" in theirs and mine["num_gpu_blocks"] != theirs["num_gpu_blocks"]:
        out.append(Finding("GPU KV blocks", "warn", f"{theirs['num_gpu_blocks']} (as {name}'s server)",
                           mine["num_gpu_blocks"], f"{CACHE_INFO} num_gpu_blocks={mine['num_gpu_blocks']}"))
    a, b = live.model(engine.name_served), ref.model(engine.name_served)
    if engine.max_model_len is None and a and b and a.get("max_model_len") != b.get("max_model_len"):
        out.append(Finding("max_model_len", "mismatch", f"{b.get('max_model_len')} (as {name}'s server)",
                           str(a.get("max_model_len")), "/v1/models max_model_len"))
    return out


def _one_server(live: LiveConfig, earlier: dict[str, LiveConfig]) -> list[Finding]:
    """Two arms whose servers started at the same instant with the same cache configuration may be one server."""
    out = []
    for name, ref in earlier.items():
        if live.process_start_time is not None and live.process_start_time == ref.process_start_time \
                and live.cache_config == ref.cache_config:
            out.append(Finding("distinct server", "warn", f"not {name}'s server", f"the same as {name}'s",
                               "same process_start_time_seconds and cache configuration"))
    return out


def compare(arm: Arm, engine: EngineSpec, live: LiveConfig, earlier: dict[str, LiveConfig]) -> list[Finding]:
    """Every finding for ``arm``'s live server; ``earlier`` holds the live configurations of the arms before it,
    the baseline first."""
    out = _model(engine, live)
    out += _scheduler(engine, live)
    if live.flavor == "trtllm":
        return [*out, Finding("CPU tier (kv_cache_config.host_cache_size)", "unverified", _declared_tier(arm),
                              "not exposed", TRTLLM_NOTE),
                Finding("block reuse", "unverified", "as declared", "not exposed", TRTLLM_NOTE)]
    cc = live.cache_config
    if cc is None:
        return [*out, Finding("cache configuration (CPU tier, prefix caching, block size)", "unverified",
                              _declared_tier(arm), "not exposed", f"no {CACHE_INFO} on the metrics endpoint")]
    out += _vllm_cache(arm, engine, live, cc)
    if earlier:
        base_name, base = next(iter(earlier.items()))
        out += _against(base_name, engine, live, base)
    return out + _one_server(live, earlier)


def refusal(arm: str, findings: list[Finding]) -> str | None:
    """Why the arm is not judged (every mismatch, both values named), or None."""
    bad = [f.sentence() for f in findings if f.status == "mismatch"]
    return f"arm {arm}: " + "; ".join(bad) if bad else None
