"""What else changed where a history's level moved: the scenario (its hash), the engine's version or its image.

A change point is the first run at a new level, placed within one run of the true shift (the rule's measured
accuracy, :mod:`harness.stats.changepoint`). A change of the scenario file, the engine version or the engine image
between two successive runs of the history within one run of it (between the run two before and the run after the
change point) coincides with it, and the change point is attributed to it: ``scenario-changed`` first (an edited
scenario measures something else; every figure may move), then ``engine-changed`` (a new version or image is the
usual reason a baseline moves). Only a change point with neither is ``drift``. A value not recorded on one side
(an older summary, an attached server whose version is unknown) is no evidence of a change and is not one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

from harness.schema.summary import Summary

Cause = Literal["drift", "scenario-changed", "engine-changed"]
What = Literal["scenario", "engine-version", "image"]
WINDOW = 1  # runs either side of the change point a coincident change may be at


class Versioned(Protocol):
    """What a run says about its scenario and engine (an index entry has these fields)."""

    @property
    def run_dir(self) -> str: ...
    @property
    def scenario_hash(self) -> str | None: ...
    @property
    def engine_version(self) -> str | None: ...
    @property
    def image(self) -> str | None: ...


class Coincidence(BaseModel):
    """A change of the scenario, engine version or image next to a change point."""

    model_config = ConfigDict(extra="forbid")
    what: What
    before: str
    after: str
    run_dir: str  # the first run with the new value
    offset: int  # that run's position relative to the change point's run (-1, 0 or +1)


def engine_version(summary: Summary) -> str | None:
    """The engine's version: what the engine's own pre-launch check reported, else the installed package the
    manifest recorded under the engine's name; the simulator's is the harness's (it is harness code)."""
    if summary.validation is not None:
        for arm in summary.validation.arms:
            if arm.engine_version:
                return arm.engine_version
    name = "harness" if summary.engine == "sim" else summary.engine
    return summary.versions.get(name) or None


def _value(run: Versioned, what: What) -> str | None:
    if what == "scenario":
        return run.scenario_hash
    return run.engine_version if what == "engine-version" else run.image


def coincidences(runs: Sequence[Versioned], at: int) -> list[Coincidence]:
    """Changes between successive ``runs`` (a history, oldest first) within :data:`WINDOW` of ``runs[at]``."""
    found: list[Coincidence] = []
    for what in ("scenario", "engine-version", "image"):
        for k in range(max(1, at - WINDOW), min(len(runs), at + WINDOW + 1)):
            before, after = _value(runs[k - 1], what), _value(runs[k], what)
            if before and after and before != after:
                found.append(Coincidence(what=what, before=before, after=after, run_dir=runs[k].run_dir,
                                         offset=k - at))
    return found


def cause(found: Sequence[Coincidence]) -> Cause:
    """What the change point is attributed to: the scenario's change first, then the engine's, else drift."""
    whats = {c.what for c in found}
    if "scenario" in whats:
        return "scenario-changed"
    return "engine-changed" if whats else "drift"
