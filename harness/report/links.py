"""Links from the report to the run directory's raw files: relative, percent-encoded, never outside the run."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from harness.rundir.layout import (
    COMPOSE_DIR,
    JUNIT,
    LOGS_DIR,
    MANIFEST,
    METRICS_DIR,
    REQUESTS,
    SCENARIO,
    STEPS,
    SUMMARY_JSON,
    SUMMARY_MD,
    compose_name,
    log_name,
)
from harness.schema.summary import Summary

# (relative path, what it holds) in the order the report lists them; see harness.rundir.layout.
LAYOUT: tuple[tuple[str, str], ...] = (
    (MANIFEST, "versions, image digests, host, scenario hash, exact launch commands"),
    (SCENARIO, "the scenario as resolved"),
    (REQUESTS, "one row per request"),
    (STEPS, "step boundaries"),
    (f"{METRICS_DIR}/", "raw scrapes and canonical samples per arm"),
    (f"{LOGS_DIR}/", "server logs (secrets redacted)"),
    (f"{COMPOSE_DIR}/", "compose files reproducing each arm's launch"),
    (SUMMARY_JSON, "this report's numbers as data"),
    (SUMMARY_MD, "short summary for CI and pull requests"),
    (JUNIT, "rules and decisions as test cases"),
)
_PER_ARM = (f"{LOGS_DIR}/", f"{COMPOSE_DIR}/")  # folders whose files are listed only where they exist
_SAFE_SEGMENT = re.compile(r"^[^\x00-\x1f\x7f\\]+$")


@dataclass(frozen=True)
class RawLink:
    """One link to a file or folder in the run directory."""

    path: str
    href: str
    description: str
    exists: bool


def safe_href(rel: str) -> str | None:
    """A percent-encoded relative href for a path inside the run directory, or None if the path is not one."""
    if not rel or rel.startswith(("/", "\\")) or "\\" in rel:
        return None
    pure = PurePosixPath(rel)
    parts = pure.parts
    if any(p in ("..", ".") or not _SAFE_SEGMENT.match(p) for p in parts):
        return None
    # quote() turns "javascript:" into "javascript%3A", so the result is always a relative reference.
    return quote(rel, safe="/")


def raw_links(summary: Summary, run_dir: Path | None) -> list[RawLink]:
    """Links to the layout's files, per-arm logs and compose files, and the summary's own ``files`` entries."""
    wanted: list[tuple[str, str]] = list(LAYOUT)
    for arm in summary.arms:
        wanted.append((log_name(arm.name), f"server log of arm {arm.name}"))
        wanted.append((compose_name(arm.name), f"compose file for arm {arm.name}"))
        if arm.launch is not None and arm.launch.compose_file:
            wanted.append((arm.launch.compose_file, f"compose file for arm {arm.name}"))
    for name, rel in summary.files.items():
        wanted.append((rel, name))
    seen: set[str] = set()
    links: list[RawLink] = []
    for rel, description in wanted:
        key = rel.rstrip("/")
        href = safe_href(rel)
        if href is None or key in seen:
            continue
        seen.add(key)
        exists = run_dir is not None and (run_dir / key).exists()
        per_arm = rel.startswith(_PER_ARM) and rel not in _PER_ARM
        if per_arm and not exists:
            continue  # only list per-arm files that are there
        links.append(RawLink(path=rel, href=href, description=description, exists=exists))
    return links
