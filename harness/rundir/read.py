"""Validated readers of the files ``harness report`` rebuilds a summary from: ``manifest.json``, ``checks.json``,
``steps.jsonl``, ``arms.jsonl`` and the request records (``requests.parquet`` or ``records/*/*.parquet``).

Each file is read with bounds (:mod:`harness.rundir.bounded`) and checked against the shape the harness
writes, so a hand-edited or corrupt file is one :class:`~harness.rundir.errors.ReportInputError` naming the file,
the line and the field (``steps.jsonl line 3: end_ns: ...``) instead of a ``KeyError`` deep in the analysis.
Fields the summary does not read are passed through unchecked; the readers return what the file holds (with
numbers coerced to their types) as plain dicts, in file order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from harness.core.input_files import MIB, InputFileError, check_regular
from harness.rundir.bounded import describe_errors, input_file_error, read_json, read_json_lines
from harness.rundir.errors import ReportInputError
from harness.rundir.layout import RunDir
from harness.rundir.records import SCHEMA
from harness.schema.summary import CheckItem, ClientHealth

MAX_MANIFEST_BYTES = 16 * MIB
MAX_CHECKS_BYTES = 16 * MIB
MAX_JOURNAL_BYTES = 256 * MIB
MAX_NS = 2**63 - 1  # clock readings are signed 64-bit nanoseconds
MAX_STEP_NS = 7 * 86_400 * 10**9  # a step (or drill phase) longer than a week is not one the harness ran
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


class StepEntry(_Passthrough):
    """One line of ``steps.jsonl``: a finished step, warm-up or drill phase, with its clock readings."""

    arm: str
    step: int = Field(ge=-100_000, le=100_000)
    label: str = ""
    start_ns: int = Field(ge=0, le=MAX_NS)
    end_ns: int = Field(ge=0, le=MAX_NS)
    start_wall_ns: int | None = Field(default=None, ge=0, le=MAX_NS)
    end_wall_ns: int | None = Field(default=None, ge=0, le=MAX_NS)
    concurrency: int | None = Field(default=None, ge=0)
    rate_rps: float | None = Field(default=None, ge=0)
    planned_duration_s: float | None = Field(default=None, ge=0)
    requests: int | None = Field(default=None, ge=0)
    errors: int | None = Field(default=None, ge=0)
    warmup: bool = False
    ended_early: bool = False
    stop_reason: str | None = None
    drill: str | None = None
    client: ClientHealth | None = None

    @model_validator(mode="after")
    def _span(self) -> StepEntry:
        if self.end_ns < self.start_ns:
            raise ValueError(f"end_ns ({self.end_ns}) is before start_ns ({self.start_ns})")
        if self.end_ns - self.start_ns > MAX_STEP_NS:
            raise ValueError(f"end_ns - start_ns is {(self.end_ns - self.start_ns) / 1e9:.3g} s, longer than any "
                             f"step ({MAX_STEP_NS // 10**9} s at most)")
        return self


class FailureEntry(_Passthrough):
    """Why an arm failed, as ``arms.jsonl`` records it."""

    phase: Literal["start", "readiness", "live-config", "step", "drill", "harness"] = "harness"
    message: str = "unknown"
    log_tail: list[str] = Field(default_factory=list)


class ArmEvent(_Passthrough):
    """One line of ``arms.jsonl``."""

    arm: str
    event: str
    at: str | None = None
    command: str | None = None
    failure: FailureEntry | None = None


_CHECKS = TypeAdapter(list[CheckItem])


def _invalid(source: str, exc: ValidationError) -> ReportInputError:
    return ReportInputError(f"{source}: {describe_errors(exc)}")


def read_manifest(run: RunDir) -> dict[str, Any]:
    """``manifest.json`` as a dict, checked."""
    data = read_json(run.manifest, max_bytes=MAX_MANIFEST_BYTES, what="manifest.json",
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
    path = run.root / "checks.json"
    if not path.exists() and not path.is_symlink():
        return []
    data = read_json(path, max_bytes=MAX_CHECKS_BYTES, what="checks.json")
    if not isinstance(data, list):
        raise ReportInputError(f"{path}: expected a JSON list of checks, found {type(data).__name__}")
    try:
        return _CHECKS.validate_python(data)
    except ValidationError as exc:
        raise _invalid(str(path), exc) from None


def _journal(path: Path, model: type[_Passthrough]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for number, obj in read_json_lines(path, max_bytes=MAX_JOURNAL_BYTES, what=path.name):
        try:
            out.append(model.model_validate(obj).model_dump(exclude_unset=True))
        except ValidationError as exc:
            raise _invalid(f"{path} line {number}", exc) from None
    return out


def read_step_entries(run: RunDir) -> list[dict[str, Any]]:
    """Every entry of ``steps.jsonl`` (drill phases included), checked."""
    return _journal(run.steps, StepEntry)


def read_arm_events(run: RunDir) -> list[dict[str, Any]]:
    """Every event of ``arms.jsonl``, checked."""
    return _journal(run.root / "arms.jsonl", ArmEvent)


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
        hint = "; remove it to rebuild from the records/ parts" if path.name == "requests.parquet" and \
            any((path.parent / "records").glob("*/*.parquet")) else ""
        raise ReportInputError(f"{path}: not a readable Parquet file ({str(exc).splitlines()[0]}){hint}") from None


def check_requests(run: RunDir) -> None:
    """``requests.parquet`` (or, without it, every record part) is a Parquet file of request records."""
    if run.requests.exists() or run.requests.is_symlink():
        check_record_schema(str(run.requests), _schema(run.requests))
        return
    for part in sorted((run.root / "records").glob("*/*.parquet")):
        try:
            check_regular(part, max_bytes=MAX_RECORDS_BYTES, what="request-record file")
        except InputFileError as exc:
            raise input_file_error(exc) from None
        try:
            schema = pq.read_schema(part)
        except (OSError, pa.ArrowException):
            continue  # an unreadable part is skipped by the loader, as when the run built requests.parquet
        check_record_schema(str(part), schema)
