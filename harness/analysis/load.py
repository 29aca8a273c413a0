"""Read a run's request records back from the run directory as the DataFrame the analysis works on.

``requests.parquet`` is used when present; otherwise the per-arm parts under ``records/`` (an interrupted run). List
columns (``chunk_ns``, ``hash_ids``) stay Arrow-backed and ``*_ns`` columns are nullable ``Int64``, so 64-bit clock
readings keep their precision and a million rows load in seconds. Step boundaries are the ``steps.jsonl`` entries
(:func:`harness.rundir.journal.read_step_entries`).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.rundir.layout import RunDir
from harness.rundir.records import SCHEMA

log = logging.getLogger(__name__)


def _types_mapper(dtype: pa.DataType) -> object:
    if pa.types.is_list(dtype) or pa.types.is_large_list(dtype):
        return pd.ArrowDtype(dtype)
    if pa.types.is_integer(dtype):
        return {8: pd.Int8Dtype(), 16: pd.Int16Dtype(), 32: pd.Int32Dtype(), 64: pd.Int64Dtype()}[dtype.bit_width]
    return None


def table_to_frame(table: pa.Table) -> pd.DataFrame:
    """An Arrow table of request records as the DataFrame the analysis expects."""
    frame: pd.DataFrame = table.to_pandas(types_mapper=_types_mapper, self_destruct=False)
    return frame


PartCache = dict[tuple[Path, int, int], pa.Table]


def parts_table(parts: list[Path], cache: PartCache | None = None) -> pa.Table:
    """The readable record parts concatenated (their columns as written); unreadable ones are skipped with a
    logged warning. ``cache`` keeps each part read, by path, size and modification time: a part is written once,
    atomically, under a name of its own, so a reader that comes back (a sequential look) reads only the new ones."""
    tables: list[pa.Table] = []
    for part in parts:
        key = None
        if cache is not None:
            try:
                stat = part.stat()
            except OSError:
                stat = None
            key = None if stat is None else (part, stat.st_size, stat.st_mtime_ns)
            if key is not None and key in cache:
                tables.append(cache[key])
                continue
        try:
            table = pq.read_table(part)
        except (OSError, pa.ArrowException) as exc:
            log.warning("skipped unreadable record part %s: %s", part, exc)
            continue
        if cache is not None and key is not None:
            cache[key] = table
        tables.append(table)
    if not tables:
        return SCHEMA.empty_table()
    return pa.concat_tables(tables, promote_options="default")


def load_requests(run_dir: Path) -> pd.DataFrame:
    """Every request record of a run, one row per request (empty, with the record columns, when there are none)."""
    run = RunDir(run_dir)
    if run.requests.exists():
        try:
            return table_to_frame(pq.read_table(run.requests, memory_map=True))
        except (OSError, pa.ArrowException) as exc:
            log.warning("cannot read %s (%s); falling back to the record parts", run.requests, exc)
    return table_to_frame(parts_table(run.record_parts()))
