"""The live-configuration records of a run: ``live_config/<arm>.json``, one per external (or attached) arm, written
before its first step by the live guard (:mod:`harness.run.live_guard`) and read back by the summary
(:mod:`harness.decision.live_config`). Reads are bounded; a record that cannot be read is ``None``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.core.atomic import write_json_atomic
from harness.rundir.bounded import read_json
from harness.rundir.errors import ReportInputError
from harness.rundir.layout import LIVE_CONFIG_DIR, RunDir

LIVE_DIR = LIVE_CONFIG_DIR
MAX_RECORD_BYTES = 4 << 20
MAX_RECORDS = 256


def record_path(run_root: Path, arm: str) -> Path:
    """Where an arm's live configuration is recorded."""
    return RunDir(run_root).live_config_dir / f"{arm}.json"


def read_record(path: Path) -> dict[str, Any] | None:
    """One record as a dict, or ``None`` when it is missing, too large, not JSON or not an object."""
    try:
        data = read_json(path, max_bytes=MAX_RECORD_BYTES, what=f"{LIVE_DIR}/{path.name}")
    except ReportInputError:
        return None
    return data if isinstance(data, dict) else None


def record_paths(run_root: Path) -> list[Path]:
    """The run's records in name order (at most :data:`MAX_RECORDS`; none when the folder is absent or a link)."""
    folder = RunDir(run_root).live_config_dir
    if not folder.is_dir() or folder.is_symlink():
        return []
    return sorted(folder.glob("*.json"))[:MAX_RECORDS]


def write_record(run_root: Path, arm: str, record: dict[str, Any]) -> None:
    """Write (replace whole) an arm's record; the caller has redacted it."""
    path = record_path(run_root, arm)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, record)
