"""The whole scenario: engine, ordered arms, workload, steps, SLOs, rules, drills and check settings."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from harness.config.arms import Arm
from harness.config.base import StrictModel
from harness.config.checks_spec import ChecksSpec
from harness.config.drills import Drill
from harness.config.engine import EngineSpec
from harness.config.rules import RulesSpec, SloSpec
from harness.config.steps import StepsSpec
from harness.config.workload import WorkloadSpec


class Scenario(StrictModel):
    """A rollout scenario as written in ``scenarios/*.yaml``."""

    name: str = Field(min_length=1, max_length=128)
    description: str | None = None
    engine: EngineSpec
    arms: list[Arm] = Field(min_length=1)
    workload: WorkloadSpec
    steps: StepsSpec
    slo: SloSpec = Field(default_factory=SloSpec)
    rules: RulesSpec = Field(default_factory=RulesSpec)
    drills: list[Drill] = Field(default_factory=list)
    checks: ChecksSpec = Field(default_factory=ChecksSpec)

    @model_validator(mode="after")
    def _arm_overrides_are_engine_fields(self) -> Scenario:
        known = set(EngineSpec.model_fields)
        for i, arm in enumerate(self.arms):
            unknown = sorted(set(arm.engine) - known)
            if unknown:
                raise ValueError(f"arms[{i}].engine has unknown field(s) {', '.join(unknown)}; "
                                 f"valid: {', '.join(sorted(known))}")
        return self

    def arm(self, name: str) -> Arm:
        """The arm with this name (KeyError if absent)."""
        for arm in self.arms:
            if arm.name == name:
                return arm
        raise KeyError(name)

    def engine_for(self, arm: Arm) -> EngineSpec:
        """The engine spec with the arm's overrides applied (validated)."""
        if not arm.engine:
            return self.engine
        merged: dict[str, Any] = self.engine.model_dump()
        merged.update(arm.engine)
        return EngineSpec.model_validate(merged)

    @property
    def baseline(self) -> Arm:
        """The first arm (checks require it to be ``gpu-only``)."""
        return self.arms[0]
