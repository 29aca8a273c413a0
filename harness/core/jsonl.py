"""Reading JSON Lines files that may end in a torn line (a writer that crashed mid-write)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_objects(path: Path) -> list[dict[str, Any]]:
    """Every complete JSON object line of ``path`` ([] when absent); blank, torn or non-object lines are skipped."""
    if not path.exists():
        return []
    out: list[dict[str, Any]] = []
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        line = raw.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, RecursionError):  # torn, or nested too deep to be a line the harness wrote
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out
