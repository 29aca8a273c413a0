"""The base of every ``summary.json`` model: unknown fields are refused, so a summary is exactly its schema."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class SchemaModel(BaseModel):
    """A part of ``summary.json``; ``extra="forbid"``."""

    model_config = ConfigDict(extra="forbid")
