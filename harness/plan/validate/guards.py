"""Guards on what the engine resolved, not on the argv the harness wrote (vLLM; docs/validation.md).

Three rules, each run on :class:`~harness.schema.validation.ResolvedArm` records:

* **planned = resolved**: every field the harness sets (lengths, parallelism, memory fraction, prefix caching, the
  offload connector, its bytes, spec, eviction policy and fs-tier directories) resolved to the planned value. The
  harness's own checks (lengths, /dev/shm, host headroom, disk tier) read the plan, so this rule is what makes them
  hold for what the engine will run; an ``extra_args`` flag that overrides one of them fails it.
* **one dimension**: between an arm and the baseline only offload fields may differ in what vLLM resolved.
* **a gpu-only arm resolves to no connector and no offload size.**

One rule is the harness's own, and says so: an offload tier that holds 0 chunks (vLLM's CPUOffloadingSpec accepts
it and runs without a CPU tier). Each resolved offload arm also gets an ok item with its chunk size and count at the
target GPU's block size.
"""

from __future__ import annotations

import math

from harness.config.arms import Arm, VllmConnectorOffload
from harness.config.engine import EngineSpec
from harness.config.scenario import Scenario
from harness.engines.sizes import human_bytes
from harness.engines.volumes import disk_tier_volumes
from harness.schema.summary import CheckItem
from harness.schema.validation import ArmValidation, ResolvedArm, ResolvedOffload

# ResolvedEngine fields every arm must share (kv_offloading_* are offload settings; host/port are per launch).
SHARED_FIELDS = ("model", "served_model_name", "max_model_len", "dtype", "tensor_parallel_size",
                 "pipeline_parallel_size", "data_parallel_size", "gpu_memory_utilization", "max_num_seqs",
                 "max_num_batched_tokens", "enable_prefix_caching", "cache_dtype", "block_size", "user_block_size",
                 "enable_prompt_tokens_details")
HARNESS_RULE = "harness rule"


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, int | float) and isinstance(b, int | float) and math.isclose(a, b, rel_tol=1e-12)
    return a == b


def planned_engine(engine: EngineSpec) -> dict[str, object]:
    """The engine fields the harness renders, as vLLM should resolve them (None: the harness leaves it to vLLM)."""
    planned: dict[str, object] = {"tensor_parallel_size": engine.tensor_parallel_size,
                                  "gpu_memory_utilization": engine.gpu_memory_utilization,
                                  "enable_prefix_caching": engine.enable_prefix_caching,
                                  "enable_prompt_tokens_details": True}
    for name in ("max_model_len", "max_num_seqs", "max_num_batched_tokens", "served_model_name"):
        value = getattr(engine, name)
        if value is not None:
            planned[name] = value
    return planned


def _field_path(name: str) -> str:
    return "engine.enable_prompt_tokens_details (always on)" if name == "enable_prompt_tokens_details" \
        else f"engine.{name}"


def _planned_vs_resolved_engine(index: int, arm: Arm, engine: EngineSpec, got: ResolvedArm) -> list[str]:
    out = []
    for name, want in planned_engine(engine).items():
        have = getattr(got.engine, name)
        if have is not None and not _same(have, want):
            out.append(f"{name}: vLLM resolved {have!r}, the harness planned {want!r} ({_field_path(name)}); a flag "
                       f"in engine.extra_args or arms[{index}].engine.extra_args overrides it")
    return out


def _tier_bytes(off: ResolvedOffload) -> int | None:
    raw = off.cpu_bytes_to_use or off.extra_config.get("cpu_bytes_to_use")
    try:
        return round(float(raw)) if raw is not None else None
    except (TypeError, ValueError):
        return None


def _planned_vs_resolved_offload(index: int, arm: Arm, engine: EngineSpec, got: ResolvedArm) -> list[str]:
    off = got.offload if got.offload is not None and got.offload.connector else None
    where = f"arms[{index}].offload"
    if arm.tier == "gpu-only":
        found = []
        if off is not None:
            size = _tier_bytes(off)
            found.append(f"connector {off.connector}" + (f" with cpu_bytes_to_use {size}" if size else ""))
        if got.engine.kv_offloading_size_gib is not None:
            found.append(f"kv_offloading_size {got.engine.kv_offloading_size_gib:g} GiB")
        return [f"a gpu-only arm must resolve to no KV connector and no offload size, but vLLM resolved "
                f"{' and '.join(found)}; a flag in engine.extra_args or arms[{index}].engine.extra_args turns "
                "offload on"] if found else []
    if off is None:
        return [f"{where} plans a CPU tier, but vLLM resolved no KV connector"]
    out = []
    if off.connector != "OffloadingConnector":
        out.append(f"vLLM resolved connector {off.connector}, the harness plans OffloadingConnector")
    planned, resolved = arm.cpu_tier_bytes(), _tier_bytes(off)
    if resolved is not None and resolved != planned:
        out.append(f"CPU tier: vLLM resolved cpu_bytes_to_use {resolved}, the harness planned {planned} ({where})")
    plan_off = arm.offload
    if isinstance(plan_off, VllmConnectorOffload):
        if off.spec and off.spec != plan_off.spec_name:
            out.append(f"spec: vLLM resolved {off.spec}, the harness planned {plan_off.spec_name}")
        if off.eviction_policy and off.eviction_policy != plan_off.eviction_policy:
            out.append(f"eviction_policy: vLLM resolved {off.eviction_policy}, the harness planned "
                       f"{plan_off.eviction_policy}")
    _, dirs = disk_tier_volumes(arm, docker=engine.effective_launcher == "docker")
    want_dirs = sorted(dirs.values())
    got_dirs = sorted(str(t.get("root_dir")) for t in off.tiers or off.extra_config.get("secondary_tiers") or [])
    if (want_dirs or got_dirs) and got_dirs != want_dirs:
        out.append(f"fs tier directories: vLLM resolved {got_dirs}, the harness mounts and checks {want_dirs}; the "
                   "tier would write where the harness's disk checks, markers, cleanup and drills do not look")
    return out


def _one_dimension(index: int, got: ResolvedArm, base: ResolvedArm, base_name: str) -> list[str]:
    out = []
    for name in SHARED_FIELDS:
        a, b = getattr(got.engine, name), getattr(base.engine, name)
        if not _same(a, b):
            out.append(f"{name}: {a!r} here, {b!r} in the baseline ({base_name})")
    return [f"only offload settings may differ between arms, but what vLLM resolved for arms[{index}] differs from "
            f"the baseline in {'; '.join(out)}"] if out else []


def _chunks_item(arm: str, off: ResolvedOffload) -> CheckItem:
    if off.num_chunks is None or off.chunk_bytes is None:
        return CheckItem(name="engine-resolved", level="ok", arm=arm,
                         message=f"{off.spec or off.connector}: chunk figures not computed "
                         f"({off.target_block_source or 'no target block size'})")
    if off.num_chunks < 1:
        return CheckItem(name="tier-chunks", level="error", arm=arm,
                         message=f"{HARNESS_RULE}: the CPU tier ({_tier_bytes(off)} bytes) holds 0 offload chunks of "
                         f"{human_bytes(off.chunk_bytes)} ({off.tokens_per_chunk} tokens at the target GPU's block "
                         f"size {off.target_block_size}); vLLM's {off.spec} accepts this and would run with no CPU "
                         "tier at all; give the tier at least one chunk (a useful tier holds thousands)")
    tiers = "".join(f"; {t.get('type')} tier at {t.get('root_dir')}" for t in off.tiers)
    return CheckItem(name="engine-resolved", level="ok", arm=arm,
                     message=f"{off.spec}: {off.num_chunks} chunks of {off.tokens_per_chunk} tokens "
                     f"({human_bytes(off.chunk_bytes)} each) at the target GPU's block size {off.target_block_size} "
                     f"({off.target_block_source}); manager {off.manager}{tiers}")


def resolved_checks(scenario: Scenario, results: list[ArmValidation]) -> list[CheckItem]:
    """The guards on every arm vLLM resolved (nothing for an arm without a resolved record)."""
    if scenario.engine.kind != "vllm":
        return []
    got = {r.arm: r.resolved for r in results if r.resolved is not None}
    out: list[CheckItem] = []
    base = scenario.arms[0]
    for index, arm in enumerate(scenario.arms):
        resolved = got.get(arm.name)
        if resolved is None:
            continue
        engine = scenario.engine_for(arm)
        problems = _planned_vs_resolved_engine(index, arm, engine, resolved)
        problems += _planned_vs_resolved_offload(index, arm, engine, resolved)
        out += [CheckItem(name="engine-resolved", level="error", arm=arm.name, message=p) for p in problems]
        if index > 0 and base.name in got:
            out += [CheckItem(name="one-dimension-resolved", level="error", arm=arm.name, message=p)
                    for p in _one_dimension(index, resolved, got[base.name], base.name)]
        if resolved.offload is not None and resolved.offload.connector == "OffloadingConnector":
            out.append(_chunks_item(arm.name, resolved.offload))
    return out
