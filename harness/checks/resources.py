"""Checks on the host: memory headroom for CPU tiers, disk-tier directories and room, GPU runtime."""

from __future__ import annotations

from pathlib import Path

from harness.checks.disk_tier import DiskTierError, ownership, validate_root_dir
from harness.checks.host import HostFacts
from harness.config.scenario import Scenario
from harness.summary import CheckItem

GIB = float(1 << 30)


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def check_host_headroom(scenario: Scenario, host: HostFacts) -> list[CheckItem]:
    """CPU-tier bytes (vLLM: total across TP ranks) plus the reserve must fit in available host memory."""
    out: list[CheckItem] = []
    available = host.mem_available_bytes()
    reserve = scenario.checks.host_reserve_gib * GIB
    for arm in scenario.arms:
        tier = arm.cpu_tier_bytes()
        if tier == 0:
            continue
        need = tier + reserve
        tp = scenario.engine_for(arm).tensor_parallel_size
        note = f" (total across {tp} TP ranks)" if scenario.engine.kind == "vllm" and tp > 1 else ""
        if need > available:
            out.append(CheckItem(name="host-headroom", level="error", arm=arm.name,
                                 message=f"CPU tier {_gib(tier)}{note} + reserve {_gib(reserve)} = {_gib(need)} "
                                 f"exceeds the host's available memory {_gib(available)}; shrink the tier or "
                                 "checks.host_reserve_gib"))
        elif need > 0.9 * available:
            out.append(CheckItem(name="host-headroom", level="warn", arm=arm.name,
                                 message=f"CPU tier {_gib(tier)}{note} + reserve {_gib(reserve)} leaves under 10% "
                                 f"of the available {_gib(available)}"))
        else:
            out.append(CheckItem(name="host-headroom", level="ok", arm=arm.name,
                                 message=f"CPU tier {_gib(tier)}{note} + reserve {_gib(reserve)} fits in "
                                 f"{_gib(available)} available"))
    return out


def check_disk_tiers(scenario: Scenario, host: HostFacts) -> list[CheckItem]:
    """Disk-tier directory rules, free space, and vLLM's missing size cap."""
    out: list[CheckItem] = []
    reserve = scenario.checks.disk_reserve_gib * GIB
    for i, arm in enumerate(scenario.arms):
        for j, tier in enumerate(arm.fs_tiers()):
            where = f"arms[{i}].offload.secondary_tiers[{j}].root_dir"
            try:
                path = validate_root_dir(tier.root_dir)
            except DiskTierError as exc:
                out.append(CheckItem(name="disk-tier", level="error", arm=arm.name, message=f"{where}: {exc}"))
                continue
            state = ownership(path)
            if state == "foreign":
                out.append(CheckItem(name="disk-tier", level="error", arm=arm.name,
                                     message=f"{where}: {path} holds files the harness did not create; the harness "
                                     "never deletes what it did not create, so give an empty or new directory"))
                continue
            free = host.disk_free_bytes(Path(path))
            size = (tier.size_gib or 0) * GIB
            if size and size + reserve > free:
                out.append(CheckItem(name="disk-tier", level="error", arm=arm.name,
                                     message=f"{where}: tier size {_gib(size)} + reserve {_gib(reserve)} exceeds "
                                     f"free disk {_gib(free)} at {path}"))
            else:
                out.append(CheckItem(name="disk-tier", level="ok", arm=arm.name,
                                     message=f"{where}: {path} is {state}; {_gib(free)} free"))
            if scenario.engine.kind == "vllm":
                out.append(CheckItem(name="disk-tier-cap", level="warn", arm=arm.name,
                                     message=f"{where}: vLLM 0.32's fs tier has no size cap of its own; it can "
                                     f"fill the {_gib(free)} free at {path} — watch disk usage or use a "
                                     "dedicated volume"))
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
