"""The report's view of the engine's own validation: the loud line when arms were not validated, and per arm what
the engine resolved (its offload configuration first)."""

from __future__ import annotations

from harness.schema.summary import Summary
from harness.schema.validation import ArmValidation, resolved_line

NOT_RECORDED = ("NOT VALIDATED: this run recorded no engine validation (a run directory from before validation.json, "
                "or its file is unreadable); what the engine resolved is unknown")


def validation_banner(summary: Summary) -> str | None:
    """The loud line of the report's top, or None when every arm was validated (or the engine is simulated)."""
    if summary.simulated:
        return None
    if summary.validation is None:
        return NOT_RECORDED
    return summary.validation.banner()


def validation_rows(summary: Summary) -> list[tuple[str, str, str, str]]:
    """(arm, status, what the engine resolved, where it ran) per validated arm."""
    if summary.validation is None:
        return []
    return [(r.arm, r.status, _resolved_text(r), _where(r)) for r in summary.validation.arms]


def _resolved_text(result: ArmValidation) -> str:
    line = resolved_line(result)
    if line is not None:
        return line
    return f"nothing resolved ({result.stage or result.status}): {result.message}"


def _where(result: ArmValidation) -> str:
    version = f"{result.engine_version} " if result.engine_version else ""
    notes = f" ({'; '.join(result.notes)})" if result.notes else ""
    return f"{version}{result.where}{notes}"
