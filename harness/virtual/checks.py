"""What a scenario asks that the virtual clock cannot give, said before anything runs (``harness run`` exits 2).

The virtual clock runs the simulated engine and its load in the harness process, so what only exists around a
served simulator has no meaning there: the simulator's fault injection (crashes, stalls, error and malformed-chunk
rates: faults of a process and its HTTP streams; the disk-read slowdown is modelled and kept) and load workers on
other machines. Drills without a simulated meaning (``storage_pressure``: a real file system and the served
simulator's admin endpoint) are skipped when they come up, with the reason journaled (:data:`SKIPPED_DRILLS`).
"""

from __future__ import annotations

from harness.config.scenario import Scenario
from harness.engines.registry import build_launch_spec
from harness.sim.faults import Faults
from harness.virtual.engine import EngineStartError, resolve_spec

UNMODELLED_FAULTS = ("crash_after_s", "crash_after_requests", "stall_after_tokens", "error_rate",
                     "malformed_sse_rate")
SKIPPED_DRILLS = {"storage_pressure": "storage pressure fills a real file system and throttles the served "
                                      "simulator's disk reads: it has no meaning on the virtual clock"}


def virtual_refusals(scenario: Scenario) -> list[str]:
    """Why the scenario cannot run on the virtual clock (empty: it can)."""
    problems: list[str] = []
    if scenario.load.remote_workers:
        problems.append("load.remote_workers: the virtual clock runs the load inside the harness; remove it or run "
                        "on the real clock (engine.sim_clock: real)")
    default = Faults()
    for arm in scenario.arms:
        try:
            opts, _cfg, _banner = resolve_spec(build_launch_spec(scenario.engine_for(arm), arm, host_port=0))
        except (EngineStartError, ValueError):
            continue  # the arm's own start-up failure, journaled when it starts (as on the real clock)
        given = [name for name in UNMODELLED_FAULTS if getattr(opts.faults, name) != getattr(default, name)]
        if given:
            flags = ", ".join("--" + name.replace("_", "-") for name in given)
            problems.append(f"arm {arm.name}: engine.sim_args sets {flags}: fault injection of the served simulator "
                            "is not modelled on the virtual clock; remove it or set engine.sim_clock: real")
    return problems


def skipped_drill(kind: str) -> str | None:
    """Why a drill of ``kind`` does not run on the virtual clock (None: it runs)."""
    return SKIPPED_DRILLS.get(kind)
