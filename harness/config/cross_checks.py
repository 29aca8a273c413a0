"""Checks across the scenario's sections: a field that one section accepts but another section's value makes lead
nowhere is refused at load, naming the field, instead of being silently ignored during the run.

* a trace replayed by its timestamps (``workload.trace.mode: timestamps``) is paced by the trace: a concurrency
  level replays it at its own pace, so levels of different concurrency (or a concurrency search) would all send
  the same arrivals; ``rate_rps`` levels rescale it;
* ``workload.trace.speed`` scales the timestamps only where no level's ``rate_rps`` rescales them;
* a drill without ``arm`` runs on the first ``tiered`` arm, so a scenario without one would never run it;
* ``drills[i].read_slowdown`` throttles the simulator's disk reads (its admin endpoint): a real engine has none.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.config.arms import Arm
from harness.config.drills import Drill
from harness.config.engine import EngineSpec
from harness.config.steps import StepsSpec
from harness.config.workload import WorkloadSpec


def check_trace_pacing(workload: WorkloadSpec, steps: StepsSpec) -> None:
    """Raise ValueError when a trace's pacing makes a level's (or the search's) load setting lead nowhere.

    A ``concurrency`` level replays a timestamps trace at the trace's own pace (the number of users is not used),
    so one such level is how a scenario asks for that pace; several that differ would promise rising load and
    replay the same arrivals at every step."""
    trace = workload.trace
    if trace is None or trace.mode != "timestamps":
        return
    users = {level.concurrency for level in steps.levels if level.concurrency is not None}
    if len(users) > 1:
        first = next(i for i, level in enumerate(steps.levels) if level.concurrency is not None)
        raise ValueError(f"steps.levels[{first}].concurrency: workload.trace.mode is timestamps, so the trace's own "
                         "timestamps pace every concurrency level and levels of different concurrency would replay "
                         "the same arrivals; give rate_rps levels (each rescales the trace to that mean rate) or "
                         "set workload.trace.mode: closed_loop (the level's users take the requests in order)")
    for i, level in enumerate(steps.levels):
        if trace.speed != 1.0 and level.rate_rps is not None:
            raise ValueError(f"workload.trace.speed: steps.levels[{i}].rate_rps rescales the trace's timestamps to "
                             "its own mean rate, so speed would be ignored; remove speed or pace that level by the "
                             "trace (a concurrency level)")
    if steps.search is not None and steps.search_kind == "concurrency":
        raise ValueError("steps.search: a concurrency search against a trace in mode: timestamps would not change "
                         "the load (the timestamps pace it); search by rate (rate_rps levels) or set "
                         "workload.trace.mode: closed_loop")


def check_drill_targets(drills: Sequence[Drill], arms: Sequence[Arm], engine: EngineSpec) -> None:
    """Raise ValueError when a drill could never run, or asks for what the engine cannot do."""
    has_tiered = any(arm.tier == "tiered" for arm in arms)
    for i, drill in enumerate(drills):
        if drill.arm is None and not has_tiered:
            raise ValueError(f"drills[{i}].arm: without an arm a drill runs on the first tiered arm, and this "
                             "scenario has none; name the arm it should run on")
        if drill.read_slowdown is not None and engine.kind != "sim":
            raise ValueError(f"drills[{i}].read_slowdown: throttling disk-tier reads is the simulator's admin "
                             f"endpoint; a {engine.kind} server has none (use fill_gib to fill the tier's disk)")
