"""Read a run's request records and step boundaries back from the run directory.

``requests.parquet`` is used when present; otherwise the per-arm parts under ``records/`` (an interrupted run). List
columns (``chunk_ns``, ``hash_ids``) stay Arrow-backed and ``*_ns`` columns are nullable ``Int64``, so 64-bit clock
readings keep their precision and a million rows load in seconds.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict

from harness.rundir.layout import RunDir
from harness.rundir.records import SCHEMA

log = logging.getLogger(__name__)


class StepSpan(BaseModel):
    """One line of ``steps.jsonl``: a step's boundaries (``*_ns``: perf_counter_ns; ``*_wall_ns``: time_ns)."""

    model_config = ConfigDict(extra="ignore")
    arm: str
    step: int
    label: str = ""
    concurrency: int | None = None
    rate_rps: float | None = None
    start_ns: int
    end_ns: int
    start_wall_ns: int | None = None
    end_wall_ns: int | None = None
    warmup: bool = False
    drill: str | None = None

    @property
    def duration_s(self) -> float:
        """Seconds between start and end (0 if they are reversed)."""
        return max(self.end_ns - self.start_ns, 0) / 1e9

    @property
    def measured(self) -> bool:
        """A load step that counts (not warm-up, not a drill)."""
        return self.step >= 0 and not self.warmup and self.drill is None


def read_steps(path: Path) -> list[StepSpan]:
    """Parse ``steps.jsonl``; unreadable lines (a truncated tail) are skipped with a log warning."""
    if not path.exists():
        return []
    spans: list[StepSpan] = []
    for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            spans.append(StepSpan.model_validate(json.loads(line)))
        except (json.JSONDecodeError, ValueError) as exc:
            log.warning("%s line %d skipped: %s", path, number, str(exc).splitlines()[0])
    return spans


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


def _read_parts(parts: list[Path]) -> pa.Table:
    tables: list[pa.Table] = []
    for part in parts:
        try:
            tables.append(pq.read_table(part))
        except (OSError, pa.ArrowException) as exc:
            log.warning("skipped unreadable record part %s: %s", part, exc)
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
    parts = sorted((run.root / "records").glob("*/*.parquet"))
    return table_to_frame(_read_parts(parts))
