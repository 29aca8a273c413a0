"""``validation.json``: the engine's own verdict per arm and what it resolved, written before any server starts.

The file holds a :class:`~harness.schema.validation.ValidationRecord` (``summary.json`` carries the same record). A
file from before that format (a bare list of results) reads as ``validated`` or ``incomplete``.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from harness.core.atomic import write_json_atomic
from harness.schema.validation import ArmValidation, ValidationRecord, unvalidated


def record_of(results: list[ArmValidation]) -> ValidationRecord:
    """The record of a validation that ran."""
    missing = unvalidated(results)
    if not missing:
        return ValidationRecord(state="validated", arms=results)
    return ValidationRecord(state="incomplete", arms=results,
                            reason=f"{len(missing)} of {len(results)} arm(s) could not be checked by the engine's "
                            f"own code: " + "; ".join(f"{r.arm}: {r.message[:200]}" for r in missing))


def write_validation(path: Path, record: ValidationRecord) -> None:
    """Write the record atomically."""
    write_json_atomic(path, record.model_dump(mode="json"))


def read_validation(path: Path) -> ValidationRecord | None:
    """The record, or None when the run has none (or it cannot be read: the report then says not recorded)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    try:
        if isinstance(raw, list):
            return record_of([ArmValidation.model_validate(item) for item in raw])
        return ValidationRecord.model_validate(raw)
    except ValidationError:
        return None
