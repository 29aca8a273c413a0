"""The one strict base model every configuration model derives from (unknown keys are errors)."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Base for all scenario models: unknown keys rejected, assignments validated, no arbitrary types."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)

    def changed_fields(self, names: Iterable[str]) -> list[str]:
        """Those of ``names`` whose value is not the field's default. Checks that refuse a setting nothing would read
        compare with the default, not with the fields set: a run's recorded scenario.yaml spells every default out."""
        fields = type(self).model_fields
        return [n for n in names if getattr(self, n) != fields[n].get_default(call_default_factory=True)]
