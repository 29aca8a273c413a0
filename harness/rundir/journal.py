"""The run directory's append-only JSONL journals, durable line by line, written and read through one model each
(:mod:`harness.rundir.entries`): ``steps.jsonl`` (:class:`StepEntry`), ``arms.jsonl`` (:class:`ArmEvent`) and
``drill_events.jsonl`` (:class:`DrillEvent`).

Two ways to read a journal back:

* ``strict`` (what ``harness report`` uses): bounded reads (:mod:`harness.rundir.bounded`); a torn last line (a crash
  mid-append) is skipped, any other bad line is a :class:`~harness.rundir.errors.ReportInputError` naming the file,
  the line and the field (``steps.jsonl line 3: end_ns: ...``);
* tolerant (``strict=False``, what a run reads of its own journals while it goes on): every line that is not a valid
  entry is skipped with a logged warning.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from harness.core.input_files import MIB
from harness.core.jsonl import read_objects
from harness.rundir.bounded import describe_errors, read_json_lines
from harness.rundir.entries import ArmEvent, DrillEvent, JournalLine, StepEntry
from harness.rundir.errors import ReportInputError
from harness.rundir.layout import RunDir

log = logging.getLogger(__name__)
MAX_JOURNAL_BYTES = 256 * MIB
Redact = Callable[[Any], Any]  # a JSON-like value -> the same with secrets masked (harness.secrets.redact)
Line = TypeVar("Line", bound=JournalLine)


def append(path: Path, record: dict[str, Any]) -> None:
    """Append one JSON object as a line and fsync, so a crash right after keeps it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(record, sort_keys=True, default=str) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except OSError as exc:
            # Disk full mid-line: cut the torn line off so the journal stays whole and a later append (after a
            # resume) does not glue onto it.
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
    finally:
        os.close(fd)


def read(path: Path) -> list[dict[str, Any]]:
    """All complete lines as plain dicts; a torn last line (crash mid-write) is ignored."""
    return read_objects(path)


def _as_is(value: Any) -> Any:
    return value


def append_step(run: RunDir, entry: StepEntry, redact: Redact = _as_is) -> None:
    """Journal a finished step, warm-up, drill phase or capacity probe in ``steps.jsonl``."""
    append(run.steps, redact(entry.line()))


def append_arm_event(run: RunDir, event: ArmEvent, redact: Redact = _as_is) -> None:
    """Journal an arm event in ``arms.jsonl``."""
    append(run.arms, redact(event.line()))


def append_drill_event(run: RunDir, event: DrillEvent) -> None:
    """Journal what a drill did in ``drill_events.jsonl``."""
    append(run.drill_events, event.line())


def _strict(path: Path, model: type[Line]) -> list[Line]:
    out: list[Line] = []
    for number, obj in read_json_lines(path, max_bytes=MAX_JOURNAL_BYTES, what=path.name):
        try:
            out.append(model.model_validate(obj))
        except ValidationError as exc:
            raise ReportInputError(f"{path} line {number}: {describe_errors(exc)}") from None
    return out


def _tolerant(path: Path, model: type[Line]) -> list[Line]:
    if not path.exists():
        return []
    out: list[Line] = []
    for number, raw in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            out.append(model.model_validate(json.loads(raw)))
        except (json.JSONDecodeError, RecursionError, ValueError) as exc:  # a ValidationError is a ValueError
            log.warning("%s line %d skipped: %s", path, number, str(exc).splitlines()[0] if str(exc) else exc)
    return out


def _read(path: Path, model: type[Line], strict: bool) -> list[Line]:
    return _strict(path, model) if strict else _tolerant(path, model)


def read_step_entries(run: RunDir, *, strict: bool = True) -> list[StepEntry]:
    """Every entry of ``steps.jsonl`` in file order, drill phases and probes included (``[]`` without one)."""
    return _read(run.steps, StepEntry, strict)


def read_arm_events(run: RunDir, *, strict: bool = True) -> list[ArmEvent]:
    """Every event of ``arms.jsonl`` in file order (``[]`` without one)."""
    return _read(run.arms, ArmEvent, strict)


def read_drill_events(run: RunDir, *, strict: bool = True) -> list[DrillEvent]:
    """Every event of ``drill_events.jsonl`` in file order (``[]`` without one)."""
    return _read(run.drill_events, DrillEvent, strict)
