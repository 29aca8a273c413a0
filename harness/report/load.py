"""Reading a run directory's ``summary.json`` with one clear message for every kind of bad input."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from harness.rundir import RunDir
from harness.summary import SCHEMA_VERSION, Summary

MAX_SUMMARY_BYTES = 64 << 20  # a summary.json larger than this is not one the harness wrote


class ReportInputError(Exception):
    """The input is not a run directory, or its summary.json is missing, unreadable or invalid."""


def _first_errors(exc: ValidationError, limit: int = 3) -> str:
    parts = []
    for err in exc.errors()[:limit]:
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        parts.append(f"{loc}: {err['msg']}")
    more = exc.error_count() - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def load_summary_file(path: Path) -> Summary:
    """Parse and validate one ``summary.json`` (raises :class:`ReportInputError` with the file and field)."""
    if not path.is_file():
        raise ReportInputError(f"{path}: not found (a run directory holds summary.json; was the run finished, "
                               "or is this the right directory?)")
    try:
        size = path.stat().st_size
        if size > MAX_SUMMARY_BYTES:
            raise ReportInputError(f"{path}: {size} bytes is too large for a summary.json")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReportInputError(f"{path}: cannot read: {exc}") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportInputError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from exc
    if not isinstance(data, dict):
        raise ReportInputError(f"{path}: expected a JSON object at the top level, found {type(data).__name__}")
    version = data.get("schema_version")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise ReportInputError(f"{path}: schema_version {version} is newer than this harness reads "
                               f"({SCHEMA_VERSION}); upgrade the harness")
    try:
        return Summary.model_validate(data)
    except ValidationError as exc:
        raise ReportInputError(f"{path}: invalid summary: {_first_errors(exc)}") from exc


def check_run_dir(run_dir: Path) -> RunDir:
    """The run directory, or :class:`ReportInputError` when the path is not a directory."""
    if not run_dir.exists():
        raise ReportInputError(f"{run_dir}: no such directory")
    if not run_dir.is_dir():
        raise ReportInputError(f"{run_dir}: not a directory (give a run directory such as results/<run-id>/)")
    return RunDir(run_dir)


def load_summary(run_dir: Path) -> Summary:
    """Load and validate ``RUN_DIR/summary.json``."""
    return load_summary_file(check_run_dir(run_dir).summary_json)
