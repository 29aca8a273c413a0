"""The one strict base model every configuration model derives from (unknown keys are errors)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Base for all scenario models: unknown keys rejected, assignments validated, no arbitrary types."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)
