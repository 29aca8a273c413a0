"""Checks on the host: memory headroom for CPU tiers, disk-tier directories and room, GPU runtime."""

from __future__ import annotations

from harness.config.arms import Arm, TrtllmKvCache
from harness.config.scenario import Scenario
from harness.host.disk_tier import DiskTierError, ownership, refusal, validate_root_dir
from harness.host.facts import HostFacts
from harness.schema.summary import CheckItem

GIB = float(1 << 30)


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def host_tier_bytes(scenario: Scenario, arm: Arm) -> tuple[int, str]:
    """Host memory the arm's CPU tier takes, and how it was counted.

    vLLM's ``--kv-offloading-size`` / ``cpu_bytes_to_use`` is the TOTAL across tensor-parallel ranks. TensorRT-LLM's
    ``host_cache_size`` is read by every rank's KV cache manager (one process per rank), so the host holds it once
    per rank.
    """
    tier = arm.cpu_tier_bytes()
    engine = scenario.engine_for(arm)
    tp = engine.tensor_parallel_size
    if tp > 1 and isinstance(arm.offload, TrtllmKvCache):
        return tier * tp, f" ({_gib(tier)} host_cache_size per rank x {tp} TP ranks)"
    if tp > 1 and engine.kind == "vllm":
        return tier, f" (total across {tp} TP ranks)"
    return tier, ""


def check_host_headroom(scenario: Scenario, host: HostFacts) -> list[CheckItem]:
    """CPU-tier bytes plus the reserve must fit in available host memory (the simulator only models the tier)."""
    out: list[CheckItem] = []
    available = host.mem_available_bytes()
    reserve = scenario.checks.host_reserve_gib * GIB
    for i, arm in enumerate(scenario.arms):
        tier, note = host_tier_bytes(scenario, arm)
        if tier == 0:
            continue
        need = tier + reserve
        sizes = f"CPU tier {_gib(tier)}{note} + reserve {_gib(reserve)} (checks.host_reserve_gib) = {_gib(need)}"
        if scenario.engine.kind == "sim":
            out.append(CheckItem(name="host-headroom", level="ok", arm=arm.name,
                                 message=f"simulated engine: the {_gib(tier)} CPU tier is modelled, not allocated "
                                 f"(a real engine would need {_gib(need)} of the {_gib(available)} available)"))
        elif need > available:
            out.append(CheckItem(name="host-headroom", level="error", arm=arm.name,
                                 message=f"arms[{i}] ({arm.name}): {sizes} exceeds the host's available memory "
                                 f"{_gib(available)}; shrink the tier (at most {_gib(max(0.0, available - reserve))} "
                                 "with this reserve) or run on a host with more free memory"))
        elif need > 0.9 * available:
            out.append(CheckItem(name="host-headroom", level="warn", arm=arm.name,
                                 message=f"arms[{i}] ({arm.name}): {sizes} leaves under 10% of the available "
                                 f"{_gib(available)}"))
        else:
            out.append(CheckItem(name="host-headroom", level="ok", arm=arm.name,
                                 message=f"{sizes} fits in {_gib(available)} available"))
    return out


def check_disk_tiers(scenario: Scenario, host: HostFacts) -> list[CheckItem]:
    """Disk-tier directory rules, free space, and vLLM's missing size cap."""
    out: list[CheckItem] = []
    reserve = scenario.checks.disk_reserve_gib * GIB
    simulated = scenario.engine.kind == "sim"
    for i, arm in enumerate(scenario.arms):
        for j, tier in enumerate(arm.fs_tiers()):
            where = f"arms[{i}].offload.secondary_tiers[{j}].root_dir"
            try:
                path = validate_root_dir(tier.root_dir)
            except DiskTierError as exc:
                out.append(CheckItem(name="disk-tier", level="error", arm=arm.name, message=f"{where}: {exc}"))
                continue
            state = ownership(path)
            if state in ("foreign", "unreadable"):
                why = (refusal(path) if state == "foreign"
                       else "cannot be read by this user; give a directory the harness may create and write")
                out.append(CheckItem(name="disk-tier", level="error", arm=arm.name, message=f"{where}: {path} {why}"))
                continue
            free = host.disk_free_bytes(path)
            size = (tier.size_gib or 0) * GIB
            sized = f"tier size {_gib(size)} (size_gib) + reserve {_gib(reserve)} (checks.disk_reserve_gib)"
            if size and size + reserve > free and not simulated:
                out.append(CheckItem(name="disk-tier", level="error", arm=arm.name,
                                     message=f"{where}: {sized} = {_gib(size + reserve)} exceeds the free disk "
                                     f"{_gib(free)} at {path}; lower size_gib or use a larger volume"))
            else:
                room = f"{sized} fits; " if size and not simulated else ""
                sim = "; simulated engine: its tier files are small headers" if simulated else ""
                out.append(CheckItem(name="disk-tier", level="ok", arm=arm.name,
                                     message=f"{where}: {path} is {state}; {room}{_gib(free)} free{sim}"))
            if scenario.engine.kind == "vllm":
                out.append(CheckItem(name="disk-tier-cap", level="warn", arm=arm.name,
                                     message=f"{where}: vLLM 0.32's fs tier has no size cap of its own; it can "
                                     f"fill the {_gib(free)} free at {path} (size_gib is not passed to vLLM); watch "
                                     "disk usage or use a dedicated volume"))
    return out


def check_gpu_runtime(scenario: Scenario, host: HostFacts, mode: str) -> list[CheckItem]:
    """Docker-launched real engines need the NVIDIA container runtime: warn in plan, error in run."""
    if scenario.engine.kind == "sim" or scenario.engine.effective_launcher != "docker":
        return []
    ok, why = host.gpu_runtime()
    if ok:
        return [CheckItem(name="gpu-runtime", level="ok", message=why)]
    level = "error" if mode == "run" else "warn"
    return [CheckItem(name="gpu-runtime", level=level,
                      message=f"no GPU runtime for containers: {why}; {scenario.engine.kind} containers need the "
                      "NVIDIA Container Toolkit (see docs/gpu-runner.md)")]
