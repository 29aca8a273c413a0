"""The run directory layout (``results/<run-id>/``): every stage reads what the previous one wrote here.

```
manifest.json        versions, image digests, host, scenario hash, exact launch commands (secrets redacted)
scenario.yaml        the scenario as resolved
progress.json        which arms/steps are complete (for --resume)
requests.parquet     one row per request, built from records/ parts
records/<arm>/part-*.parquet   request records, flushed at least at every step end
steps.jsonl          step boundaries: arm, step, label, start/end (monotonic and wall ns), warm-up flag
metrics/<arm>/scrapes.jsonl.gz raw scrapes with wall-clock and monotonic timestamps
metrics/<arm>/samples.parquet  canonical samples
logs/<arm>.log       server logs (secrets redacted)
compose/<arm>.yaml   a compose file reproducing the arm's launch
summary.json summary.md junit.xml report.html
```
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
DRILL_STEP_BASE = -2  # drill n journals its phases as step DRILL_STEP_BASE - n (fixed steps count up from 0)


def new_run_id(scenario_name: str, now: float | None = None) -> str:
    """``YYYYmmdd-HHMMSS-<scenario>-<4 hex>``: sortable, unique, safe as a directory name."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now if now is not None else time.time()))
    name = _SAFE.sub("-", scenario_name).strip("-")[:40] or "run"
    return f"{stamp}-{name}-{secrets.token_hex(2)}"


@dataclass(frozen=True)
class RunDir:
    """Paths inside one run directory."""

    root: Path

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def scenario(self) -> Path:
        return self.root / "scenario.yaml"

    @property
    def progress(self) -> Path:
        return self.root / "progress.json"

    @property
    def requests(self) -> Path:
        return self.root / "requests.parquet"

    @property
    def steps(self) -> Path:
        return self.root / "steps.jsonl"

    @property
    def drill_events(self) -> Path:
        return self.root / "drill_events.jsonl"

    @property
    def summary_json(self) -> Path:
        return self.root / "summary.json"

    @property
    def summary_md(self) -> Path:
        return self.root / "summary.md"

    @property
    def junit(self) -> Path:
        return self.root / "junit.xml"

    @property
    def report_html(self) -> Path:
        return self.root / "report.html"

    def records_dir(self, arm: str) -> Path:
        return self.root / "records" / arm

    def metrics_dir(self, arm: str) -> Path:
        return self.root / "metrics" / arm

    def log(self, arm: str) -> Path:
        return self.root / "logs" / f"{arm}.log"

    def compose(self, arm: str) -> Path:
        return self.root / "compose" / f"{arm}.yaml"

    def create(self) -> RunDir:
        """Create the directory tree (the run directory itself must not exist yet or be ours)."""
        for sub in ("records", "metrics", "logs", "compose"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        return self
