"""A CPU tier that cannot hold one KV block is refused before launch (vLLM would start with zero offload chunks).

The bytes of one block come from the model's ``config.json`` when it is on this machine (a local model directory, or
a snapshot in the Hugging Face cache under ``engine.model_cache_dir`` or ``~/.cache/huggingface``):
``2 (K and V) x layers x KV heads x head size x dtype bytes x tokens per block``, the whole model across TP ranks
(``cpu_bytes_to_use`` is the total). Tokens per block: the connector's ``block_size`` when set, else 16 (vLLM's GPU
default; the CPU build uses 128, which the in-engine validation, ``harness plan --validate``, checks exactly).
Without a local config the check says so; the in-engine validation covers it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.config.arms import VllmConnectorOffload
from harness.config.scenario import Scenario
from harness.engines.sizes import human_bytes
from harness.schema.summary import CheckItem

GPU_BLOCK_TOKENS = 16
_DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8": 1, "fp8": 1}


def local_model_config(model: str, cache_dir: str | None, base: Path | None = None) -> Path | None:
    """The model's config.json on this machine, if any."""
    direct = Path(model).expanduser()
    if not direct.is_absolute() and base is not None and (base / direct).exists():
        direct = base / direct
    if (direct / "config.json").is_file():
        return direct / "config.json"
    if "/" not in model or model.startswith(("/", ".")):
        return None
    roots = [Path(cache_dir).expanduser()] if cache_dir else []
    roots.append(Path.home() / ".cache" / "huggingface")
    name = "models--" + model.replace("/", "--")
    for root in roots:
        for hub in (root / "hub" / name, root / name):
            found = sorted(hub.glob("snapshots/*/config.json"))
            if found:
                return found[-1]
    return None


def block_bytes(config: dict[str, Any], tokens: int) -> int | None:
    """KV bytes of one block of ``tokens`` tokens for the whole model (None when the config lacks a figure)."""
    cfg = config.get("text_config", config)
    try:
        layers = int(cfg["num_hidden_layers"])
        heads = int(cfg["num_attention_heads"])
        kv_heads = int(cfg.get("num_key_value_heads") or heads)
        head = int(cfg.get("head_dim") or int(cfg["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    return 2 * layers * kv_heads * head * _DTYPE_BYTES.get(dtype, 2) * tokens


def check_tier_holds_a_block(scenario: Scenario) -> list[CheckItem]:
    """Every vLLM CPU tier holds at least one KV block of the model."""
    if scenario.engine.kind != "vllm":
        return []
    out: list[CheckItem] = []
    base = Path(scenario.source_file).parent if scenario.source_file else None
    for i, arm in enumerate(scenario.arms):
        tier = arm.cpu_tier_bytes()
        if not tier:
            continue
        engine = scenario.engine_for(arm)
        path = local_model_config(engine.model, engine.model_cache_dir, base)
        if path is None:
            out.append(CheckItem(name="tier-blocks", level="ok", arm=arm.name,
                                 message=f"model config of {engine.model} not on this machine: tier size vs block size "
                                 "not checked here (harness plan --validate checks it with vLLM's own figures)"))
            continue
        off = arm.offload
        tokens = off.block_size if isinstance(off, VllmConnectorOffload) and off.block_size else GPU_BLOCK_TOKENS
        try:
            one = block_bytes(json.loads(path.read_text(encoding="utf-8")), tokens)
        except (OSError, ValueError):
            one = None
        if one is None:
            continue
        field = "kv_offloading_size_gib" if off.kind == "vllm-native" else "cpu_bytes_to_use"
        if tier < one:
            out.append(CheckItem(name="tier-blocks", level="error", arm=arm.name,
                                 message=f"arms[{i}].offload.{field}: the CPU tier {human_bytes(tier)} cannot hold one "
                                 f"KV block ({tokens} tokens of {engine.model} = {human_bytes(one)}, from {path}); "
                                 f"give it at least {one} bytes (a useful tier holds thousands of blocks)"))
        else:
            out.append(CheckItem(name="tier-blocks", level="ok", arm=arm.name,
                                 message=f"CPU tier holds {tier // one} blocks of {tokens} tokens ({human_bytes(one)} "
                                 "each)"))
    return out
