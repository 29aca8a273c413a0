"""Shared-memory checks: vLLM's CPU tier is one mmap in ``/dev/shm`` (figures: :mod:`harness.engines.shm`).

A container gets ``shm_size`` from the tier unless the scenario sets one (then it must hold the tier plus vLLM's own
use, or the arm would fail at start-up with "Insufficient space in /dev/shm for CPU KV offload shared region"); with
``ipc: host`` or for a local process the host's free ``/dev/shm`` must hold it. The simulator models its tier and
allocates nothing, so its figures are reported, not enforced here (the simulator itself enforces ``--shm-bytes``).
"""

from __future__ import annotations

from harness.config.scenario import Scenario
from harness.engines.shm import FLOOR, recommended_bytes, shm_need
from harness.engines.sizes import human_bytes
from harness.host.facts import HostFacts
from harness.schema.summary import CheckItem


def _docker_size(g: int) -> str:
    """Bytes as a docker size, rounded up to whole GiB (what a user writes in engine.shm_size)."""
    return f"{-(-g // (1 << 30))}g"


def check_shm(scenario: Scenario, host: HostFacts) -> list[CheckItem]:
    """Each CPU-tier arm's /dev/shm need against what it gets."""
    out: list[CheckItem] = []
    free = host.shm_free_bytes()
    for i, arm in enumerate(scenario.arms):
        engine = scenario.engine_for(arm)
        need = shm_need(engine, arm)
        if not need.tier_bytes:
            continue
        where = f"arms[{i}] ({arm.name})"
        if engine.kind == "sim":
            out.append(CheckItem(name="shm", level="ok", arm=arm.name, message=f"simulated engine: {need.why}; the "
                                 "simulator allocates nothing (in a container it checks --shm-bytes as vLLM does)"))
        elif need.size_bytes is not None and need.explicit and need.shortfall():
            fix = _docker_size(recommended_bytes(need.tier_bytes, need.own_bytes))
            out.append(CheckItem(name="shm", level="error", arm=arm.name,
                                 message=f"{where}: {need.why} cannot hold the CPU tier plus vLLM's own shared memory "
                                 f"({human_bytes(need.need_bytes)}): vLLM would refuse to start (\"Insufficient space "
                                 f"in /dev/shm for CPU KV offload shared region\"); set engine.shm_size: {fix}, or "
                                 "remove engine.shm_size (the harness sizes it from the tier), or set engine.ipc: "
                                 "host"))
        elif need.size_bytes is not None:
            out.append(CheckItem(name="shm", level="ok", arm=arm.name, message=f"{need.why}"))
        elif free is None:
            out.append(CheckItem(name="shm", level="warn", arm=arm.name,
                                 message=f"{where}: {need.why}, but this host has no /dev/shm to check"))
        elif need.need_bytes > free:
            out.append(CheckItem(name="shm", level="error", arm=arm.name,
                                 message=f"{where}: {need.why}; the host's /dev/shm has {human_bytes(free)} free: "
                                 "vLLM would refuse to start (\"Insufficient space in /dev/shm for CPU KV offload "
                                 "shared region\"); enlarge it (mount -o remount,size="
                                 f"{_docker_size(need.need_bytes + FLOOR // 16)} /dev/shm) or shrink the CPU tier"))
        else:
            out.append(CheckItem(name="shm", level="ok", arm=arm.name,
                                 message=f"{need.why}; {human_bytes(free)} free in the host's /dev/shm"))
    return out
