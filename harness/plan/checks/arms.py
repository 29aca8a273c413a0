"""Checks on the arms: order, tiers, one dimension at a time, offload forms each engine supports."""

from __future__ import annotations

from typing import Any

from harness.config.arms import TIER_ORDER, Arm, TrtllmKvCache, VllmConnectorOffload
from harness.config.scenario import Scenario
from harness.engines import adapter_for
from harness.schema.summary import CheckItem

# Engine fields an arm may change without breaking the one-dimension rule: none. Only `offload` may differ.
ALLOWED_ENGINE_OVERRIDES: frozenset[str] = frozenset()
# TensorRT-LLM kv_cache_config fields that are offload settings; the rest are cache settings kept equal.
TRTLLM_OFFLOAD_FIELDS = frozenset({"host_cache_size", "secondary_offload_min_priority"})


def check_arm_order(scenario: Scenario) -> list[CheckItem]:
    """Baseline first and gpu-only, unique names, tiers non-decreasing."""
    out: list[CheckItem] = []
    names = [a.name for a in scenario.arms]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        out.append(CheckItem(name="arm-names", level="error", message=f"arm names must be unique; repeated: "
                             f"{', '.join(dupes)}"))
    base = scenario.arms[0]
    if base.tier != "gpu-only":
        out.append(CheckItem(name="baseline-first", level="error", arm=base.name,
                             message=f"arms[0] ({base.name}) is tier {base.tier}; the first arm must be the "
                             "gpu-only baseline"))
    for i in range(1, len(scenario.arms)):
        prev, cur = scenario.arms[i - 1], scenario.arms[i]
        if TIER_ORDER[cur.tier] < TIER_ORDER[prev.tier]:
            out.append(CheckItem(name="tier-order", level="error", arm=cur.name,
                                 message=f"arms[{i}] ({cur.name}, {cur.tier}) comes after {prev.tier}; order arms "
                                 "gpu-only -> cpu -> tiered"))
        if cur.tier == "gpu-only":
            out.append(CheckItem(name="tier-order", level="error", arm=cur.name,
                                 message=f"arms[{i}] ({cur.name}) is a second gpu-only arm; only the baseline is "
                                 "gpu-only"))
    if not any(item.level == "error" for item in out):
        out.append(CheckItem(name="arm-order", level="ok",
                             message=f"{len(names)} arm(s) in order: " + " -> ".join(
                                 f"{a.name} ({a.tier})" for a in scenario.arms)))
    return out


def _tier_matches_offload(scenario: Scenario, index: int, arm: Arm) -> list[CheckItem]:
    kind = scenario.engine.kind
    off = arm.offload
    where = f"arms[{index}].offload"
    adapter = adapter_for(kind)
    out: list[CheckItem] = []
    if arm.tier == "tiered" and not adapter.supports_disk_tier:
        out.append(CheckItem(name="tiered-trtllm", level="error", arm=arm.name,
                             message=f"arms[{index}] ({arm.name}) is tier tiered, but only host-memory offload "
                             "(kv_cache_config.host_cache_size) is configured for TensorRT-LLM, so there is no disk "
                             "tier to test; use tier cpu with offload kind trtllm"))
    kinds = adapter.offload_kinds(scenario.engine_for(arm))
    if off.kind not in kinds:
        label = f"{kind} (sim_flavor {scenario.engine.sim_flavor})" if kind == "sim" else kind
        out.append(CheckItem(name="offload-form", level="error", arm=arm.name,
                             message=f"{where}.kind: {off.kind} is not a {label} setting; valid for {label}: "
                             f"{', '.join(kinds)}"))
    if out:
        return out
    has_cpu = arm.cpu_tier_bytes() > 0
    has_disk = bool(arm.fs_tiers())
    if arm.tier == "gpu-only" and (has_cpu or has_disk):
        return [CheckItem(name="tier-offload", level="error", arm=arm.name,
                          message=f"{where}: a gpu-only arm must not configure offload (use kind: none"
                          + (", or kind: trtllm with host_cache_size: 0)" if kind == "trtllm" else ")"))]
    if arm.tier == "cpu" and (not has_cpu or has_disk):
        need = "a CPU tier and no secondary tier" if has_disk else "a CPU tier"
        return [CheckItem(name="tier-offload", level="error", arm=arm.name,
                          message=f"{where}: a cpu arm needs {need}; valid: "
                          + _CPU_FORMS.get(kind, "vllm-native, vllm-connector (CPUOffloadingSpec) or trtllm "
                                           "(host_cache_size > 0)"))]
    if arm.tier == "tiered" and not (isinstance(off, VllmConnectorOffload) and has_disk):
        return [CheckItem(name="tier-offload", level="error", arm=arm.name,
                          message=f"{where}: a tiered arm needs kind vllm-connector with spec_name "
                          "TieringOffloadingSpec and an fs entry in secondary_tiers")]
    return []


_CPU_FORMS = {
    "vllm": "kind vllm-native (kv_offloading_size_gib) or kind vllm-connector with spec_name CPUOffloadingSpec",
    "trtllm": "kind trtllm with host_cache_size > 0 (bytes)",
}


def check_tiers(scenario: Scenario) -> list[CheckItem]:
    """Each arm's tier matches its offload settings and the engine supports them."""
    out: list[CheckItem] = []
    for i, arm in enumerate(scenario.arms):
        out += _tier_matches_offload(scenario, i, arm)
    if not out:
        out.append(CheckItem(name="tier-offload", level="ok", message="every arm's offload settings match its tier"))
    return out


def _trtllm_cache_fields(off: Any) -> dict[str, Any]:
    kv = off if isinstance(off, TrtllmKvCache) else TrtllmKvCache(kind="trtllm")
    return {k: v for k, v in kv.model_dump().items() if k not in TRTLLM_OFFLOAD_FIELDS and k != "kind"}


def _engine_field_path(scenario: Scenario, index: int, field: str) -> str:
    """Where a differing engine field is set: the arm's override, else the baseline's, else the engine section."""
    if field in scenario.arms[index].engine:
        return f"arms[{index}].engine.{field}"
    if field in scenario.arms[0].engine:
        return f"arms[0].engine.{field}"
    return f"engine.{field}"


def check_one_dimension(scenario: Scenario) -> list[CheckItem]:
    """Every arm equals the baseline except cache and offload settings; name each differing field."""
    out: list[CheckItem] = []
    base = scenario.arms[0]
    base_engine = scenario.engine_for(base).model_dump()
    for i, arm in enumerate(scenario.arms[1:], start=1):
        engine = scenario.engine_for(arm).model_dump()
        changed = sorted(k for k in engine if engine[k] != base_engine[k] and k not in ALLOWED_ENGINE_OVERRIDES)
        for field in changed:
            out.append(CheckItem(name="one-dimension", level="error", arm=arm.name,
                                 message=f"{_engine_field_path(scenario, i, field)} differs from the baseline "
                                 f"({base_engine[field]!r} -> {engine[field]!r}); only cache/offload settings may "
                                 "change between arms, so remove the override"))
        if isinstance(arm.offload, TrtllmKvCache) or isinstance(base.offload, TrtllmKvCache):
            a, b = _trtllm_cache_fields(base.offload), _trtllm_cache_fields(arm.offload)
            for field in sorted(k for k in a if a[k] != b[k]):
                out.append(CheckItem(name="one-dimension", level="warn", arm=arm.name,
                                     message=f"arms[{i}].offload.{field} differs from the baseline "
                                     f"({a[field]!r} -> {b[field]!r}); a cache setting besides the offload "
                                     "tier changed, so the comparison is not one dimension at a time"))
    out += _tier_steps(scenario)
    if not out:
        out.append(CheckItem(name="one-dimension", level="ok",
                             message="arms differ from the baseline only in offload settings"))
    return out


def _tier_steps(scenario: Scenario) -> list[CheckItem]:
    """A tiered arm should keep the CPU tier of the cpu arm before it, so only the disk tier is new."""
    out: list[CheckItem] = []
    last_cpu: tuple[int, Arm] | None = None
    for i, arm in enumerate(scenario.arms):
        if arm.tier == "cpu":
            last_cpu = (i, arm)
        elif arm.tier == "tiered" and last_cpu is not None:
            j, cpu = last_cpu
            if arm.cpu_tier_bytes() != cpu.cpu_tier_bytes():
                out.append(CheckItem(name="one-dimension", level="warn", arm=arm.name,
                                     message=f"arms[{i}] ({arm.name}) has a {arm.cpu_tier_bytes()}-byte CPU tier but "
                                     f"arms[{j}] ({cpu.name}) has {cpu.cpu_tier_bytes()}; keep the CPU tier equal so "
                                     "the tiered arm changes only the disk tier"))
    return out
