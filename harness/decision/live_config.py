"""What the live guard found, as data and as the summary's ``live-config`` check rows.

A :class:`Finding` is one compared field of a live server (:mod:`harness.run.live_compare` makes them; the live
guard, :mod:`harness.run.live_guard`, records them in ``live_config/<arm>.json``); :func:`live_config_checks` turns
each recorded arm into one check row, so ``harness report`` shows what was verified, what differs and what the
server does not expose, from the run directory alone.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from harness.rundir.live_config import LIVE_DIR, read_record, record_paths
from harness.schema.summary import CheckItem

Status = Literal["match", "mismatch", "warn", "unverified"]
CHECK_NAME = "live-config"


@dataclass(frozen=True)
class Finding:
    """One compared field."""

    field: str
    status: Status
    declared: str
    live: str
    source: str

    def sentence(self) -> str:
        if self.status == "unverified":
            return f"{self.field} ({self.declared} declared): not verifiable — {self.source}"
        return f"declared {self.field} {self.declared}, the live server reports {self.live} ({self.source})"

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def overview(findings: list[Finding]) -> str:
    """One line for the report: what matched, what could not be verified, what differs."""
    parts = []
    ok = [f"{f.field} {f.live}" for f in findings if f.status == "match"]
    if ok:
        parts.append("verified " + ", ".join(ok))
    for status, head in (("mismatch", "differs"), ("warn", "warning"), ("unverified", "not verifiable")):
        items = [f.sentence() for f in findings if f.status == status]
        if items:
            parts.append(f"{head}: " + "; ".join(items))
    return "; ".join(parts) or "nothing compared"


def _finding(raw: dict[str, Any]) -> Finding:
    status = raw.get("status")
    return Finding(field=str(raw.get("field", "")), declared=str(raw.get("declared", "")),
                   live=str(raw.get("live", "")), source=str(raw.get("source", "")),
                   status=status if status in ("match", "mismatch", "warn") else "unverified")


def _level(findings: list[Finding], refused: bool) -> str:
    if refused:
        return "error"
    return "warn" if any(f.status in ("warn", "unverified") for f in findings) else "ok"


def live_config_checks(run_root: Path) -> list[CheckItem]:
    """One ``live-config`` check row per recorded arm (``[]`` for a run without external arms)."""
    out = []
    for path in record_paths(run_root):
        record = read_record(path)
        if record is None:
            out.append(CheckItem(name=CHECK_NAME, level="warn", arm=path.stem,
                                 message=f"{LIVE_DIR}/{path.name} could not be read"))
            continue
        findings = [_finding(f) for f in record.get("findings", []) if isinstance(f, dict)]
        refused = bool(record.get("refused"))
        text = str(record.get("message") or overview(findings))
        out.append(CheckItem(name=CHECK_NAME, level=_level(findings, refused), arm=str(record.get("arm", path.stem)),
                             message=f"{record.get('base_url', '?')}: {text}"))
    return out
