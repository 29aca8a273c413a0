"""Reading the JSON and JSON Lines files of a run directory with bounds: regular files only, a size cap, a line
cap, nesting at most :data:`MAX_DEPTH` deep, and one :class:`~harness.rundir.errors.ReportInputError` naming the
file (and line, and field) for every kind of bad content.

Parsing goes through :func:`pydantic_core.from_json` (jiter), whose recursion limit refuses a document nested
deeper than :data:`MAX_DEPTH` with an error instead of a ``RecursionError``; files are opened through
:mod:`harness.core.input_files` (no FIFO blocks, no device is read).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pydantic_core
from pydantic import ValidationError

from harness.core.input_files import MIB, InputFileError, iter_lines, open_regular, read_text
from harness.rundir.errors import ReportInputError

MAX_DEPTH = 200  # jiter's recursion limit: deeper documents are refused
MAX_LINE_BYTES = 4 * MIB  # one journal line (an arm's failure carries its server's last log lines)
_JITER_AT = re.compile(r"^(?P<msg>.*) at line (?P<line>\d+) column (?P<col>\d+)$")
_SHORT = 60


def _scalar(value: object) -> str | None:
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= _SHORT else repr(value[:_SHORT]) + "..."
    return None


def describe_errors(exc: ValidationError, limit: int = 3) -> str:
    """``field: problem (got value)`` for the first ``limit`` errors, ``; ``-joined, on one line."""
    parts = []
    for err in exc.errors(include_url=False)[:limit]:
        msg = err["msg"].removeprefix("Value error, ")
        if not err["loc"] and err["type"] == "value_error":  # a check across fields: its message names them
            parts.append(msg)
            continue
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        got = _scalar(err.get("input"))
        shown = f" (got {got})" if got is not None and err["type"] not in ("missing", "extra_forbidden") else ""
        parts.append(f"{loc}: {msg}{shown}")
    more = exc.error_count() - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def input_file_error(exc: InputFileError) -> ReportInputError:
    """The :class:`ReportInputError` for a file :mod:`harness.core.input_files` refused (``PATH[ line N]: ...``)."""
    where = f"{exc.source} line {exc.line}" if exc.line is not None else exc.source
    return ReportInputError(f"{where}: cannot read: {exc.problem}")


def _json_problem(exc: ValueError, *, one_line: bool = False) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    m = _JITER_AT.match(text)
    if m is None:
        return f"not valid JSON ({text})"
    msg = m["msg"]
    if "recursion limit" in msg:
        msg = f"nested deeper than {MAX_DEPTH} levels"
    where = f"column {m['col']}" if one_line else f"line {m['line']}, column {m['col']}"
    return f"not valid JSON ({where}: {msg})"


def parse_json(data: bytes | str, source: str) -> Any:
    """The JSON value in ``data``; :class:`ReportInputError` (``source: not valid JSON (...)``) otherwise."""
    try:
        return pydantic_core.from_json(data, allow_inf_nan=True)
    except ValueError as exc:
        raise ReportInputError(f"{source}: {_json_problem(exc)}") from None


def read_json(path: Path, *, max_bytes: int, what: str, missing: str = "not found") -> Any:
    """The JSON value in the regular file ``path`` (at most ``max_bytes``)."""
    if not path.exists() and not path.is_symlink():
        raise ReportInputError(f"{path}: {missing}")
    try:
        text = read_text(path, max_bytes=max_bytes, what=what)
    except InputFileError as exc:
        raise input_file_error(exc) from None
    return parse_json(text, str(path))


def read_json_lines(path: Path, *, max_bytes: int, what: str) -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every line of a journal (``[]`` when the file is absent).

    A last line that does not parse is a torn write (a crash mid-append) and is skipped; any other line that is
    not a JSON object, or is nested too deep, is a :class:`ReportInputError` naming the file and line."""
    if not path.exists() and not path.is_symlink():
        return []
    source = str(path)
    out: list[tuple[int, dict[str, Any]]] = []
    pending: tuple[int, str] | None = None  # an unparsable line: an error unless it turns out to be the last one
    try:
        with open_regular(path, max_bytes=max_bytes, what=what) as handle:
            for number, raw in iter_lines(handle, source, max_line_bytes=MAX_LINE_BYTES, max_bytes=max_bytes):
                if pending is not None:
                    raise ReportInputError(f"{source} line {pending[0]}: {pending[1]}")
                if not raw.strip():
                    continue
                try:
                    value = pydantic_core.from_json(raw, allow_inf_nan=True)
                except ValueError as exc:
                    problem = _json_problem(exc, one_line=True)
                    if "nested deeper" in problem:
                        raise ReportInputError(f"{source} line {number}: {problem}") from None
                    pending = (number, problem)
                    continue
                if not isinstance(value, dict):
                    raise ReportInputError(f"{source} line {number}: expected a JSON object, found "
                                           f"{type(value).__name__}")
                out.append((number, value))
    except InputFileError as exc:
        raise input_file_error(exc) from None
    return out
