"""The whole scenario: engine, ordered arms, workload, steps, SLOs, rules, drills and check settings."""

from __future__ import annotations

from typing import Any

from pydantic import Field, PrivateAttr, ValidationError, model_validator

from harness.config.arms import Arm
from harness.config.base import StrictModel
from harness.config.checks_spec import ChecksSpec
from harness.config.cross_checks import check_drill_targets, check_trace_pacing
from harness.config.drills import Drill
from harness.config.engine import EngineSpec
from harness.config.errors import explain
from harness.config.external_arms import check_external_arms
from harness.config.load import LoadSpec
from harness.config.rules import RulesSpec, SloSpec
from harness.config.steps import StepsSpec
from harness.config.text import Name
from harness.config.value import ValueSpec
from harness.config.workload import WorkloadSpec


class Scenario(StrictModel):
    """A rollout scenario as written in ``scenarios/*.yaml``."""

    name: Name = Field(min_length=1, max_length=128)
    description: str | None = None
    engine: EngineSpec
    arms: list[Arm] = Field(min_length=1)
    workload: WorkloadSpec
    steps: StepsSpec
    slo: SloSpec = Field(default_factory=SloSpec)
    rules: RulesSpec = Field(default_factory=RulesSpec)
    drills: list[Drill] = Field(default_factory=list)
    checks: ChecksSpec = Field(default_factory=ChecksSpec)
    load: LoadSpec = Field(default_factory=LoadSpec)
    value: ValueSpec | None = None  # what the tier is worth (harness.config.value); None: capacity alone
    _source_file: str | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _arm_overrides_are_engine_fields(self) -> Scenario:
        known = set(EngineSpec.model_fields)
        for i, arm in enumerate(self.arms):
            unknown = sorted(set(arm.engine) - known)
            if unknown:
                raise ValueError(f"arms[{i}].engine has unknown field(s) {', '.join(unknown)}; "
                                 f"valid: {', '.join(sorted(known))}")
            if arm.engine:
                merged = {**self.engine.model_dump(), **arm.engine}
                try:
                    EngineSpec.model_validate(merged)
                except ValidationError as exc:
                    path, msg = explain(dict(exc.errors()[0]), EngineSpec)
                    raise ValueError(f"arms[{i}].engine.{path}: {msg}" if path else
                                     f"arms[{i}].engine: {msg}") from None
        return self

    @model_validator(mode="after")
    def _arm_references_exist(self) -> Scenario:
        names = [a.name for a in self.arms]
        valid = ", ".join(names)
        refs: list[tuple[str, str]] = [(f"drills[{i}].arm", d.arm) for i, d in enumerate(self.drills)
                                       if d.arm is not None]
        rule_arms = [(f"rules.budgets[{i}]", r.arms) for i, r in enumerate(self.rules.budgets)]
        rule_arms += [(f"rules.regression[{i}]", r.arms) for i, r in enumerate(self.rules.regression)]
        for where, arms in rule_arms:
            refs += [(f"{where}.arms[{j}]", name) for j, name in enumerate(arms or [])]
        for path, name in refs:
            if name not in names:
                raise ValueError(f"{path}: {name!r} is not an arm of this scenario; arms: {valid}")
        return self

    @model_validator(mode="after")
    def _external_servers(self) -> Scenario:
        check_external_arms(self.engine, self.arms)
        return self

    @model_validator(mode="after")
    def _fields_that_would_lead_nowhere(self) -> Scenario:
        check_trace_pacing(self.workload, self.steps)
        check_drill_targets(self.drills, self.arms, self.engine)
        return self

    def set_source_file(self, path: str | None) -> None:
        """Remember the file this scenario came from (set by the loader; shown by ``harness plan``)."""
        self._source_file = path

    @property
    def source_file(self) -> str | None:
        """The file the scenario was loaded from, when known (not part of the dumped scenario or its hash)."""
        return self._source_file

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
