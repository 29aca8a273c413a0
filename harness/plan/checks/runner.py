"""Run every pre-flight check and collect the results."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from harness.config.scenario import Scenario
from harness.host.facts import HostFacts, OsHostFacts
from harness.plan.checks import (
    arms,
    blocks,
    engine,
    flags,
    inputs,
    load_bind,
    resources,
    shm,
    sim_start,
    tier_capacity,
    trtllm_release,
)
from harness.schema.summary import CheckItem

Mode = Literal["plan", "run"]
Check = Callable[[Scenario, HostFacts, Mode, bool], list[CheckItem]]

ALL_CHECKS: dict[str, Check] = {
    "pinned-image": lambda s, h, m, unpinned: engine.check_pinned_image(s, unpinned),
    "arm-order": lambda s, h, m, u: arms.check_arm_order(s),
    "tier-offload": lambda s, h, m, u: arms.check_tiers(s),
    "one-dimension": lambda s, h, m, u: arms.check_one_dimension(s),
    "weight-offload": lambda s, h, m, u: engine.check_weight_offload(s),
    "extra-args": lambda s, h, m, u: flags.check_managed_flags(s),
    "trtllm-release": lambda s, h, m, u: trtllm_release.check_trtllm_release(s),
    "served-name": lambda s, h, m, u: engine.check_served_name(s),
    "lengths": lambda s, h, m, u: engine.check_lengths(s),
    "host-headroom": lambda s, h, m, u: resources.check_host_headroom(s, h),
    "disk-tier": lambda s, h, m, u: resources.check_disk_tiers(s, h),
    "shm": lambda s, h, m, u: shm.check_shm(s, h),
    "tier-blocks": lambda s, h, m, u: blocks.check_tier_holds_a_block(s),
    "tier-capacity": lambda s, h, m, u: tier_capacity.check_tier_capacity(
        s, gpu_memory_bytes=_local_gpu_memory(s, h)),
    "gpu-runtime": lambda s, h, m, u: resources.check_gpu_runtime(s, h, m),
    "env-refs": lambda s, h, m, u: inputs.check_env_refs(s, h, m),
    "trace": lambda s, h, m, u: inputs.check_trace(s, m),
    "sim-start": lambda s, h, m, u: sim_start.check_sim_start(s),
    "master-bind": lambda s, h, m, u: load_bind.check_master_bind(s, m),
}

# Checks of this host's resources for servers the harness starts; skipped when the arms are external servers.
HOST_LOCAL = frozenset({"host-headroom", "disk-tier", "shm", "gpu-runtime"})


def _local_gpu_memory(scenario: Scenario, host: HostFacts) -> int | None:
    """One GPU's memory on this host, for servers the harness starts here (an external server's GPUs are not)."""
    return None if scenario.engine.effective_launcher == "external" else host.gpu_memory_bytes()


def run_checks(scenario: Scenario, *, host: HostFacts | None = None, mode: Mode = "plan",
               allow_unpinned: bool = False) -> list[CheckItem]:
    """All check results, in a stable order."""
    facts = host or OsHostFacts()
    results: list[CheckItem] = []
    external = scenario.engine.effective_launcher == "external"
    for name, check in ALL_CHECKS.items():
        if external and name in HOST_LOCAL:
            continue
        results += check(scenario, facts, mode, allow_unpinned)
    if external:
        results.append(CheckItem(name="external-servers", level="ok", message="the arms are existing deployments: "
                                 "host memory, /dev/shm, disk-tier and GPU checks are theirs (not run here); each "
                                 "server's live configuration is checked before its arm is judged"))
    return results


def has_errors(results: list[CheckItem]) -> bool:
    """True when any check failed."""
    return any(r.level == "error" for r in results)
