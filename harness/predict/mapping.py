"""A user's scenario -> the same scenario on the simulated engine with a named profile (:func:`map_scenario`).

What is kept as written: the arms and their offload settings (vLLM's ``kv_offloading_size_gib``, an
``OffloadingConnector`` config, TensorRT-LLM's ``host_cache_size``), the workload or trace, the steps, rules, SLO,
drills that have a simulated meaning, the value section and the check settings. What changes, each change recorded
with its field (the report lists them):

* the engine becomes ``kind: sim`` speaking the engine's flavour (``sim_flavor: vllm`` or ``trtllm``), launched by
  the harness itself (``launcher: process``; ``sim_clock`` as asked, virtual by default) with the profile
  (:mod:`.engine_map` says field by field what is kept, dropped or refused);
* every fs tier's ``root_dir`` becomes a directory under ``tier_root``, a temporary directory the prediction owns:
  the user's NVMe path is never touched by a prediction;
* TensorRT-LLM's ``free_gpu_memory_fraction`` (a share of what the weights and the activation peak leave) becomes
  the simulator's ``gpu_memory_utilization`` (vLLM's rule, a share of the whole GPU) giving the same KV bytes on the
  profile: ``util = (W + A + f (M - W - A)) / M``; its ``enable_block_reuse`` becomes ``enable_prefix_caching``;
* the ``load`` section (local processes, remote load machines) is not used: the prediction drives the load itself;
* a relative trace path is made absolute (the mapped scenario is written elsewhere); the name gets ``-predicted``.

Refused (:class:`~harness.predict.refusal.PredictRefused`, naming the field): tensor parallelism, external servers,
engine flags or environment that change what is modelled, a model grossly unlike the profile's
(:mod:`.model_match`), a context longer than the profile's model has, drills without a simulated meaning, and the
TensorRT-LLM settings the simulator does not model (``max_tokens``, partial reuse, a secondary-offload priority above
the default retention priority).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from harness.config.arms import Arm, TrtllmKvCache, VllmConnectorOffload
from harness.config.errors import explain
from harness.config.scenario import Scenario
from harness.predict.engine_map import check_fields
from harness.predict.model_match import compare_models
from harness.predict.refusal import PredictRefused
from harness.sim.profile import Profile

Clock = Literal["real", "virtual"]

PREDICTABLE_DRILLS = ("cache_loss", "restart", "promotion_burst")
"""Drills with a simulated meaning: losing the tier's contents, restarting the server, a burst of requests onto a
warm tier. Storage pressure fills a real file system (or throttles the simulator's disk), which says nothing about
the profile's NVMe (the virtual clock skips it too: harness/virtual/checks.py)."""

TRTLLM_DEFAULT_RETENTION_PRIORITY = 35
"""TensorRT-LLM's retention priority of a block no request prioritised. It is not the default of
``secondary_offload_min_priority``, which is 30 (``kDefaultSecondaryOffloadMinPriority`` in
cpp/tensorrt_llm/batch_manager/evictionPolicy.cpp, NVIDIA/TensorRT-LLM@05a919198033, release unknown; the harness's
version table records it unconfirmed; /work/shared/reference/engines.md says 35 for both). Blocks below the minimum
are evicted,
not offloaded. The harness's requests set no priorities, so a minimum at or under it offloads every evicted block,
which is what the simulator models; one above it offloads nothing, which it does not."""

_ENGINE_NAMES = {"vllm": "vLLM", "trtllm": "TensorRT-LLM"}
_VLLM_OFFLOAD = ("none", "vllm-native", "vllm-connector")
_TRTLLM_OFFLOAD = ("none", "trtllm")


@dataclass(frozen=True)
class PredictTarget:
    """What the scenario is predicted on: the profile, how it is named in the engine section, the clock, and the
    directory the fs tiers go to."""

    profile: Profile
    profile_name: str  # a built-in profile's name (engine.sim_profile), or the file's stem
    clock: Clock
    tier_root: Path
    profile_file: Path | None = None  # an absolute profile file (engine.sim_profile_file) instead of a built-in one


@dataclass
class Mapped:
    """The mapped scenario, and what the mapping did to the user's."""

    scenario: Scenario
    changes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _trtllm_memory(source: Scenario, profile: Profile, changes: list[str]) -> dict[str, Any]:
    """Engine fields that carry TensorRT-LLM's per-arm memory and reuse settings into the simulator's rule."""
    kvs = [(i, arm.offload if isinstance(arm.offload, TrtllmKvCache) else TrtllmKvCache(kind="trtllm"))
           for i, arm in enumerate(source.arms)]
    for name in ("free_gpu_memory_fraction", "enable_block_reuse"):
        first = getattr(kvs[0][1], name)
        for i, kv in kvs:
            if getattr(kv, name) != first:
                raise PredictRefused(f"arms[{i}].offload.{name}", f"{getattr(kv, name)} differs from the baseline's "
                                     f"{first}: the simulator sets it once for the server (from this one setting), "
                                     "so the arms would not differ only in their tier; keep it equal in every arm")
    fraction = kvs[0][1].free_gpu_memory_fraction
    m, w, a = profile.gpu.memory_bytes, profile.gpu.weights_bytes, profile.gpu.activation_reserve_bytes
    util = round((w + a + fraction * (m - w - a)) / m, 6)
    changes.append(f"arms[].offload.free_gpu_memory_fraction {fraction:g} -> engine.gpu_memory_utilization {util:g} "
                   f"(the same KV bytes on {profile.gpu.name}: (weights + activation reserve + {fraction:g} x what "
                   "they leave) / memory)")
    out: dict[str, Any] = {"gpu_memory_utilization": util}
    if not kvs[0][1].enable_block_reuse:
        out["enable_prefix_caching"] = False
        changes.append("arms[].offload.enable_block_reuse false -> engine.enable_prefix_caching false")
    return out


def _check_trtllm(i: int, kv: TrtllmKvCache) -> None:
    where = f"arms[{i}].offload"
    if kv.max_tokens is not None:
        raise PredictRefused(f"{where}.max_tokens", "a cap on the KV cache in tokens, which the simulator does not "
                             "model (its GPU cache follows the memory rule); remove it to predict")
    if kv.enable_partial_reuse:
        raise PredictRefused(f"{where}.enable_partial_reuse", "TensorRT-LLM's reuse of partly matching blocks is not "
                             "modelled (the simulator reuses full blocks only); set it false or remove it")
    if kv.secondary_offload_min_priority is not None and \
            kv.secondary_offload_min_priority > TRTLLM_DEFAULT_RETENTION_PRIORITY:
        raise PredictRefused(f"{where}.secondary_offload_min_priority", f"{kv.secondary_offload_min_priority} is above "
                             f"the default retention priority {TRTLLM_DEFAULT_RETENTION_PRIORITY}, so TensorRT-LLM "
                             "would offload none of the harness's blocks; the simulator offloads every evicted "
                             f"block: use {TRTLLM_DEFAULT_RETENTION_PRIORITY} or less")


def _map_arm(i: int, arm: Arm, arm_data: dict[str, Any], flavor: str, target: PredictTarget,
             changes: list[str]) -> None:
    if arm.server is not None:
        raise PredictRefused(f"arms[{i}].server", "a server you run has no simulated counterpart; predict the arm "
                             "with an engine the harness launches")
    if "engine" in arm_data:
        kept = check_fields(arm_data["engine"], f"arms[{i}].engine", changes.append)
        if kept:
            arm_data["engine"] = kept
        else:
            del arm_data["engine"]
    off = arm.offload
    allowed = _TRTLLM_OFFLOAD if flavor == "trtllm" else _VLLM_OFFLOAD
    if off.kind not in allowed:
        raise PredictRefused(f"arms[{i}].offload.kind", f"{off.kind} is not a setting of the scenario's engine "
                             f"({flavor}: {', '.join(allowed)})")
    if isinstance(off, TrtllmKvCache):
        _check_trtllm(i, off)
    if isinstance(off, VllmConnectorOffload):
        for j, tier in enumerate(off.secondary_tiers):
            root = target.tier_root / f"{arm.name}-fs{j}"
            arm_data["offload"]["secondary_tiers"][j]["root_dir"] = str(root)
            changes.append(f"arms[{i}].offload.secondary_tiers[{j}].root_dir: {tier.root_dir} -> {root} (a temporary "
                           "directory the prediction owns; yours is never touched)")


def _engine(source: Scenario, data: dict[str, Any], target: PredictTarget, mapped: Mapped) -> str:
    src = source.engine
    if src.effective_launcher == "external":
        raise PredictRefused("engine.launcher", "external: a server you run has no simulated counterpart; predict "
                             "with a scenario the harness launches (engine.launcher docker or process)")
    kept = check_fields(data["engine"], "engine", mapped.changes.append)
    match = compare_models(src.model, target.profile.model.name, target.profile_name)
    if match.refusal:
        raise PredictRefused("engine.model", match.refusal)
    if match.warning:
        mapped.warnings.append(f"engine.model: {match.warning}")
    limit = target.profile.model.max_model_len
    if src.max_model_len is not None and src.max_model_len > limit:
        raise PredictRefused("engine.max_model_len", f"{src.max_model_len} is longer than the profile's model takes "
                             f"({target.profile.model.name}: {limit} tokens, profile {target.profile_name}); use "
                             f"{limit} or less")
    flavor = src.sim_flavor if src.kind == "sim" else src.kind
    profile = ({"sim_profile_file": str(target.profile_file)} if target.profile_file is not None
               else {"sim_profile": target.profile_name})
    data["engine"] = {**kept, "kind": "sim", "launcher": "process", "host": "127.0.0.1", "port": 0,
                      "sim_flavor": flavor, "sim_clock": target.clock, **profile}
    speaks = _ENGINE_NAMES[flavor]
    if src.kind != "sim":
        mapped.changes.append(f"engine.kind: {src.kind} -> sim (sim_flavor {flavor}: {speaks}'s API, metrics and "
                              "offload settings)")
    elif src.sim_profile_file or src.sim_profile != target.profile_name:
        mapped.changes.append(f"engine.{'sim_profile_file' if src.sim_profile_file else 'sim_profile'}: "
                              f"{src.sim_profile_file or src.sim_profile} -> {target.profile_name}")
    mapped.changes.append(f"engine.sim_profile{'_file' if target.profile_file else ''}: {target.profile_name}, "
                          f"engine.sim_clock: {target.clock}")
    if src.effective_launcher != "process":
        mapped.changes.append(f"engine.launcher: {src.effective_launcher} -> process (the simulator needs no GPU)")
    if src.kind == "trtllm":
        data["engine"].update(_trtllm_memory(source, target.profile, mapped.changes))
    return flavor


def _rest(source: Scenario, data: dict[str, Any], changes: list[str]) -> None:
    for i, drill in enumerate(source.drills):
        if drill.kind not in PREDICTABLE_DRILLS:
            raise PredictRefused(f"drills[{i}].kind", f"{drill.kind} has no simulated meaning in a prediction "
                                 f"(drills predicted: {', '.join(PREDICTABLE_DRILLS)}); remove the drill")
    if data.pop("load", None):
        changes.append("load: not used (the prediction drives every step's load itself: no load processes or "
                       "machines)")
    trace = source.workload.trace
    if trace is not None and not Path(trace.path).is_absolute():
        base = Path(source.source_file).resolve().parent if source.source_file else Path.cwd()
        data["workload"]["trace"]["path"] = str(base / trace.path)
        changes.append(f"workload.trace.path: {trace.path} -> {base / trace.path}")
    data["name"] = f"{source.name[:118]}-predicted"
    data["description"] = f"PREDICTED on a simulator profile: {source.description or source.name}"


def map_scenario(source: Scenario, target: PredictTarget) -> Mapped:
    """The scenario to run for the prediction, and the changes and warnings (PredictRefused for what the simulator
    cannot model)."""
    data: dict[str, Any] = copy.deepcopy(source.model_dump(mode="json", exclude_unset=True))
    mapped = Mapped(scenario=source)
    flavor = _engine(source, data, target, mapped)
    for i, arm in enumerate(source.arms):
        _map_arm(i, arm, data["arms"][i], flavor, target, mapped.changes)
    _rest(source, data, mapped.changes)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        path, msg = explain(dict(exc.errors()[0]), Scenario)
        raise PredictRefused(path or "scenario", f"the scenario mapped onto the simulator is refused: {msg}") from None
    scenario.set_source_file(source.source_file)
    mapped.scenario = scenario
    return mapped
