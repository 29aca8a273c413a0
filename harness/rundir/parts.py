"""Durable request records: parquet parts written as requests complete, and ``requests.parquet`` built from them.

A :class:`PartWriter` buffers :class:`harness.rundir.records.RequestRecord` rows and writes a part file
(``records/<arm>/part-<step>-<writer>-<n>.parquet``) every ``flush_every`` records, every ``flush_interval_s``
seconds (checked as records arrive and by the caller's timer) and at the end of a step. Each part is written
to a temporary name and renamed, so a crash leaves whole parts only and loses at most the rows not yet
flushed. :func:`build_requests_parquet` concatenates every part of a run; a part that cannot be read is
skipped with a warning, never taking the others with it. Parts written before a column existed (``attempt``) read
with that column filled in (attempt 1).
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from harness.core.atomic import atomic_path
from harness.rundir.journal import read_step_entries
from harness.rundir.layout import RunDir
from harness.rundir.records import SCHEMA, RequestRecord

log = logging.getLogger(__name__)
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
PART_GLOB = "part-*.parquet"
REQUESTS_SCHEMA = SCHEMA.append(pa.field("superseded", pa.bool_()))  # requests.parquet: the records + the marker


def part_prefix(step_index: int, step_label: str, drill: str | None = None, drill_phase: str | None = None) -> str:
    """File-name prefix of one step's parts, e.g. ``part-s003-c16`` or ``part-warmup``."""
    name = "warmup" if step_index == -1 else (f"s{step_index:03d}" if step_index >= 0 else f"d{-step_index:03d}")
    label = _SAFE.sub("-", "-".join(x for x in (step_label, drill, drill_phase) if x)).strip("-")[:60]
    return f"part-{name}-{label}" if label else f"part-{name}"


class PartWriter:
    """Buffered writer of record parts for one step in one process (not thread-safe; one per hub)."""

    def __init__(self, directory: Path, prefix: str, *, flush_every: int = 512, flush_interval_s: float = 2.0,
                 writer_fn: Callable[[Callable[[], None]], None] | None = None) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.prefix = f"{prefix}-{os.getpid()}{secrets.token_hex(2)}"
        self.flush_every = flush_every
        self.flush_interval_s = flush_interval_s
        self.rows: list[dict[str, Any]] = []
        self.parts: list[Path] = []
        self.written = 0
        self._seq = 0
        self._last_flush = time.monotonic()
        self._run = writer_fn or (lambda fn: fn())

    def add(self, record: RequestRecord) -> None:
        """Buffer one record; flush if the buffer is full or old."""
        self.add_row(record.to_row())

    def add_row(self, row: dict[str, Any]) -> None:
        """Buffer one record given as a row dict."""
        self.rows.append(row)
        if len(self.rows) >= self.flush_every or time.monotonic() - self._last_flush >= self.flush_interval_s:
            self.flush()

    def due(self) -> bool:
        """True when buffered rows are older than the flush interval."""
        return bool(self.rows) and time.monotonic() - self._last_flush >= self.flush_interval_s

    def flush(self) -> Path | None:
        """Write the buffered rows as one part (atomically); return its path, or None if there was nothing."""
        self._last_flush = time.monotonic()
        if not self.rows:
            return None
        rows, self.rows = self.rows, []
        path = self.directory / f"{self.prefix}-{self._seq:05d}.parquet"
        self._seq += 1

        def write() -> None:
            table = pa.Table.from_pylist(rows, schema=SCHEMA)
            with atomic_path(path) as tmp:
                pq.write_table(table, tmp)

        self._run(write)
        self.parts.append(path)
        self.written += len(rows)
        return path


def _conform(table: pa.Table) -> pa.Table:
    """A part in the record schema; a column it predates is added (``attempt`` = 1, others empty)."""
    for field in SCHEMA:
        if field.name not in table.column_names:
            fill = pa.array([1] * table.num_rows, field.type) if field.name == "attempt" else \
                pa.nulls(table.num_rows, field.type)
            table = table.append_column(field.name, fill)
    return table.select(SCHEMA.names).cast(SCHEMA)


def read_parts(paths: list[Path]) -> tuple[pa.Table, list[str]]:
    """Concatenate readable parts (schema-conformed); unreadable ones are named in the warnings."""
    tables: list[pa.Table] = []
    warnings: list[str] = []
    for path in paths:
        try:
            table = pq.read_table(path)
            tables.append(_conform(table))
        except (OSError, pa.ArrowException, KeyError, ValueError) as exc:
            warnings.append(f"skipped unreadable record part {path}: {type(exc).__name__}: {exc}")
    if not tables:
        return SCHEMA.empty_table(), warnings
    return pa.concat_tables(tables), warnings


def find_parts(directory: Path, prefix: str = "part-") -> list[Path]:
    """Part files under ``directory`` (recursively) whose names start with ``prefix``, sorted."""
    if not directory.exists():
        return []
    return sorted(p for p in directory.rglob(PART_GLOB) if p.name.startswith(prefix))


def count_rows(paths: list[Path]) -> tuple[int, int]:
    """(requests, errors) in readable parts (for outcomes rebuilt after a crash)."""
    table, _ = read_parts(paths)
    return table.num_rows, table.num_rows - table.column("error_kind").null_count


def build_requests_parquet(run_dir: Path) -> Path:
    """Concatenate every record part of a run into ``requests.parquet`` (ordered by wall-clock send time).

    Unreadable parts (truncated by a crash, say) are skipped with a logged warning. A last column, ``superseded``,
    marks the rows of an attempt that a later attempt of the same step replaced (:mod:`harness.rundir.attempts`):
    they are kept, and no figure uses them. Returns the file's path.
    """
    from harness.rundir.attempts import superseded_mask  # pandas: not for the load generator's processes

    rd = RunDir(run_dir)
    table, warnings = read_parts(find_parts(rd.records_root))
    for warning in warnings:
        log.warning(warning)
    if table.num_rows:
        table = table.sort_by([("send_wall_ns", "ascending"), ("request_id", "ascending")])
    keys = table.select(["arm", "step", "drill", "attempt"]).to_pandas()
    superseded = superseded_mask(keys, read_step_entries(rd, strict=False))
    table = table.append_column(REQUESTS_SCHEMA.field(-1), pa.array(superseded, pa.bool_()))
    with atomic_path(rd.requests) as tmp:
        pq.write_table(table, tmp)
    return rd.requests
