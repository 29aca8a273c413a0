"""Reading a run directory's ``summary.json`` with one clear message for every kind of bad input.

A summary holding NaN or Infinity is refused, naming the field: JSON has no such numbers (strict parsers reject the
file), and the harness never writes them (pydantic writes a non-finite float as null), so such a file was edited or
written by something else, and its figures are not figures the report could show or compare.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.core.input_files import MIB
from harness.rundir.bounded import describe_errors, read_json
from harness.rundir.errors import ReportInputError
from harness.rundir.layout import SUMMARY_JSON, RunDir
from harness.schema.summary import SCHEMA_VERSION, Summary

MAX_SUMMARY_BYTES = 64 * MIB  # a summary.json larger than this is not one the harness wrote

__all__ = ["MAX_SUMMARY_BYTES", "ReportInputError", "check_run_dir", "load_summary", "load_summary_file"]


def load_summary_file(path: Path) -> Summary:
    """Parse and validate one ``summary.json`` (raises :class:`ReportInputError` with the file and field).

    The file must be a regular file of at most :data:`MAX_SUMMARY_BYTES`, nested at most
    :data:`~harness.rundir.bounded.MAX_DEPTH` deep."""
    data = read_json(path, max_bytes=MAX_SUMMARY_BYTES, what=SUMMARY_JSON,
                     missing="not found (a run directory holds summary.json; was the run finished, or is this the "
                             "right directory?)")
    if not isinstance(data, dict):
        raise ReportInputError(f"{path}: expected a JSON object at the top level, found {type(data).__name__}")
    version = data.get("schema_version")
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise ReportInputError(f"{path}: schema_version {version} is newer than this harness reads "
                               f"({SCHEMA_VERSION}); upgrade the harness")
    bad = non_finite(data)
    if bad is not None:
        where, value = bad
        raise ReportInputError(f"{path}: invalid summary: {where}: {value} is not a finite number (summary.json "
                               f"holds finite numbers or null)")
    try:
        return Summary.model_validate(data)
    except ValidationError as exc:
        raise ReportInputError(f"{path}: invalid summary: {describe_errors(exc)}") from None


def non_finite(data: Any) -> tuple[str, str] | None:
    """The first NaN or infinity in parsed JSON, as (``arms.1.steps.2.ttft_ms.p99``, ``NaN``); None: there is none."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return where or "(top level)", "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        if isinstance(value, dict):
            stack.extend((f"{where}.{k}" if where else str(k), v) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend((f"{where}.{i}" if where else str(i), v) for i, v in reversed(list(enumerate(value))))
    return None


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
