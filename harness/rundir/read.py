"""Validated readers of the files ``harness report`` rebuilds a summary from: ``manifest.json``, ``checks.json`` and
the request records (``requests.parquet`` or ``records/*/*.parquet``); the journals are read by
:mod:`harness.rundir.journal`.

Each file is read with bounds (:mod:`harness.rundir.bounded`) and checked against the shape the harness
writes, so a hand-edited or corrupt file is one :class:`~harness.rundir.errors.ReportInputError` naming the file,
and the field (``manifest.json: run_id: Field required``) instead of a ``KeyError`` deep in the analysis.
Fields the summary does not read are passed through unchecked; the readers return what the file holds (with
numbers coerced to their types) as plain dicts, in file order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from harness.core.input_files import MIB, InputFileError, check_regular
from harness.rundir.bounded import describe_errors, input_file_error, read_json
from harness.rundir.errors import ReportInputError
from harness.rundir.layout import CHECKS, MANIFEST, REQUESTS, RunDir
from harness.rundir.records import SCHEMA
from harness.schema.summary import CheckItem

MAX_MANIFEST_BYTES = 16 * MIB
MAX_CHECKS_BYTES = 16 * MIB
MAX_RECORDS_BYTES = 1 << 40  # request records are memory-mapped, not read whole: only a sanity cap
REQUIRED_COLUMNS = ("arm", "step", "request_id", "send_ns")


class _Passthrough(BaseModel):
    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


class LaunchEntry(_Passthrough):
    """One server start in ``manifest.json`` (``launches``)."""

    arm: str
    command: str
    image: str | None = None
    image_digest: str | None = None
    config_files: dict[str, str] = Field(default_factory=dict)
    env_keys: list[str] = Field(default_factory=list)


class ManifestFile(_Passthrough):
    """The fields of ``manifest.json`` that the summary reads."""

    run_id: str
    scenario_hash: str = ""
    started_at: str = ""
    host: dict[str, str | int | float | None] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)
    launches: list[LaunchEntry] = Field(default_factory=list)


_CHECKS = TypeAdapter(list[CheckItem])


def _invalid(source: str, exc: ValidationError) -> ReportInputError:
    return ReportInputError(f"{source}: {describe_errors(exc)}")


def read_manifest(run: RunDir) -> dict[str, Any]:
    """``manifest.json`` as a dict, checked."""
    data = read_json(run.manifest, max_bytes=MAX_MANIFEST_BYTES, what=MANIFEST,
                     missing="not found (every run directory has one; is this a run directory?)")
    if not isinstance(data, dict):
        raise ReportInputError(f"{run.manifest}: expected a JSON object at the top level, found "
                               f"{type(data).__name__}")
    try:
        return ManifestFile.model_validate(data).model_dump(exclude_unset=True)
    except ValidationError as exc:
        raise _invalid(str(run.manifest), exc) from None


def read_checks(run: RunDir) -> list[CheckItem]:
    """The pre-flight checks in ``checks.json`` (``[]`` when the run has none)."""
    path = run.checks
    if not path.exists() and not path.is_symlink():
        return []
    data = read_json(path, max_bytes=MAX_CHECKS_BYTES, what=CHECKS)
    if not isinstance(data, list):
        raise ReportInputError(f"{path}: expected a JSON list of checks, found {type(data).__name__}")
    try:
        return _CHECKS.validate_python(data)
    except ValidationError as exc:
        raise _invalid(str(path), exc) from None


def _kind(dtype: pa.DataType) -> str:
    if pa.types.is_null(dtype):
        return "null"
    if pa.types.is_integer(dtype):
        return "integer"
    if pa.types.is_floating(dtype):
        return "float"
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        return "string"
    if pa.types.is_boolean(dtype):
        return "bool"
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return f"list of {_kind(dtype.value_type)}"
    return str(dtype)


def _compatible(found: str, wanted: str) -> bool:
    return found in (wanted, "null") or (wanted == "float" and found == "integer") or \
        (wanted.startswith("list of ") and found.startswith("list of ")
         and _compatible(found.removeprefix("list of "), wanted.removeprefix("list of ")))


def check_record_schema(source: str, schema: pa.Schema) -> None:
    """The columns a request-record file must have, with the types the analysis reads."""
    missing = [name for name in REQUIRED_COLUMNS if schema.get_field_index(name) < 0]
    if missing:
        raise ReportInputError(f"{source}: column(s) {', '.join(missing)} missing (not a request-record file)")
    for wanted in SCHEMA:
        index = schema.get_field_index(wanted.name)
        if index < 0:
            continue
        found, kind = _kind(schema.field(index).type), _kind(wanted.type)
        if not _compatible(found, kind):
            raise ReportInputError(f"{source}: column {wanted.name}: {found}, expected {kind}")


def _schema(path: Path) -> pa.Schema:
    try:
        check_regular(path, max_bytes=MAX_RECORDS_BYTES, what="request-record file")
        return pq.read_schema(path)
    except InputFileError as exc:
        raise input_file_error(exc) from None
    except (OSError, pa.ArrowException) as exc:
        hint = "; remove it to rebuild from the records/ parts" if path.name == REQUESTS and \
            RunDir(path.parent).record_parts() else ""
        raise ReportInputError(f"{path}: not a readable Parquet file ({str(exc).splitlines()[0]}){hint}") from None


def check_requests(run: RunDir) -> None:
    """``requests.parquet`` (or, without it, every record part) is a Parquet file of request records."""
    if run.requests.exists() or run.requests.is_symlink():
        check_record_schema(str(run.requests), _schema(run.requests))
        return
    for part in run.record_parts():
        try:
            check_regular(part, max_bytes=MAX_RECORDS_BYTES, what="request-record file")
        except InputFileError as exc:
            raise input_file_error(exc) from None
        try:
            schema = pq.read_schema(part)
        except (OSError, pa.ArrowException):
            continue  # an unreadable part is skipped by the loader, as when the run built requests.parquet
        check_record_schema(str(part), schema)
