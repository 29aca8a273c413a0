"""The run directory layout (``results/<run-id>/``): every stage reads what the previous one wrote here, and this
module is the only place that spells the names of its files and folders.

```
manifest.json        versions, image digests, host, scenario hash, exact launch commands (secrets redacted)
scenario.yaml        the scenario as resolved
progress.json        which arms/steps are complete (for --resume)
checks.json          the pre-flight checks
validation.json      the engine's own verdict per arm and what it resolved (harness.schema.validation)
prediction.json      a prediction's record (harness predict; harness.rundir.prediction): the run stays PREDICTED
requests.parquet     one row per request, built from records/ parts
records/<arm>/part-*.parquet   request records, flushed at least at every step end
steps.jsonl          step boundaries: arm, step, label, start/end (monotonic and wall ns), warm-up flag, attempt
arms.jsonl           arm events: starting, ready, attempt, completed, failed, interrupted
drill_events.jsonl   what each drill did
metrics/<arm>/scrapes.jsonl.gz raw scrapes with wall-clock and monotonic timestamps
metrics/<arm>/samples.parquet  canonical samples
metrics/<arm>/host.jsonl       host telemetry readings
live_config/<arm>.json         an external arm's live configuration
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

MANIFEST = "manifest.json"
SCENARIO = "scenario.yaml"
PROGRESS = "progress.json"
CHECKS = "checks.json"
VALIDATION = "validation.json"
PREDICTION = "prediction.json"
REQUESTS = "requests.parquet"
STEPS = "steps.jsonl"
ARMS = "arms.jsonl"
DRILL_EVENTS = "drill_events.jsonl"
SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"
JUNIT = "junit.xml"
REPORT_HTML = "report.html"
REPORT_FILES = (SUMMARY_JSON, SUMMARY_MD, JUNIT, REPORT_HTML)  # what ``harness report`` writes
RECORDS_DIR = "records"
METRICS_DIR = "metrics"
LOGS_DIR = "logs"
COMPOSE_DIR = "compose"
LIVE_CONFIG_DIR = "live_config"
RECORD_PARTS = f"{RECORDS_DIR}/*/*.parquet"  # every arm's record parts (glob below the run directory)
SCRAPES_FILE = "scrapes.jsonl.gz"  # in metrics/<arm>/
SAMPLES_FILE = "samples.parquet"  # in metrics/<arm>/
HOST_FILE = "host.jsonl"  # in metrics/<arm>/


def log_name(arm: str) -> str:
    """An arm's server log, relative to the run directory."""
    return f"{LOGS_DIR}/{arm}.log"


def compose_name(arm: str) -> str:
    """An arm's compose file, relative to the run directory."""
    return f"{COMPOSE_DIR}/{arm}.yaml"


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
        return self.root / MANIFEST

    @property
    def scenario(self) -> Path:
        return self.root / SCENARIO

    @property
    def progress(self) -> Path:
        return self.root / PROGRESS

    @property
    def checks(self) -> Path:
        return self.root / CHECKS

    @property
    def validation(self) -> Path:
        return self.root / VALIDATION

    @property
    def prediction(self) -> Path:
        return self.root / PREDICTION

    @property
    def requests(self) -> Path:
        return self.root / REQUESTS

    @property
    def steps(self) -> Path:
        return self.root / STEPS

    @property
    def arms(self) -> Path:
        return self.root / ARMS

    @property
    def drill_events(self) -> Path:
        return self.root / DRILL_EVENTS

    @property
    def summary_json(self) -> Path:
        return self.root / SUMMARY_JSON

    @property
    def summary_md(self) -> Path:
        return self.root / SUMMARY_MD

    @property
    def junit(self) -> Path:
        return self.root / JUNIT

    @property
    def report_html(self) -> Path:
        return self.root / REPORT_HTML

    @property
    def records_root(self) -> Path:
        return self.root / RECORDS_DIR

    @property
    def live_config_dir(self) -> Path:
        return self.root / LIVE_CONFIG_DIR

    def records_dir(self, arm: str) -> Path:
        return self.records_root / arm

    def record_parts(self) -> list[Path]:
        """Every arm's record parts (``records/<arm>/*.parquet``), sorted."""
        return sorted(self.root.glob(RECORD_PARTS))

    def metrics_dir(self, arm: str) -> Path:
        return self.root / METRICS_DIR / arm

    def host_readings(self, arm: str) -> Path:
        return self.metrics_dir(arm) / HOST_FILE

    def log(self, arm: str) -> Path:
        return self.root / log_name(arm)

    def compose(self, arm: str) -> Path:
        return self.root / compose_name(arm)

    def create(self) -> RunDir:
        """Create the directory tree (the run directory itself must not exist yet or be ours)."""
        for sub in (RECORDS_DIR, METRICS_DIR, LOGS_DIR, COMPOSE_DIR):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        return self
