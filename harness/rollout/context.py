"""State shared by the stages of one run: the scenario, the run directory, options, cancel event, journals."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.checks.host import HostFacts
from harness.config.scenario import Scenario
from harness.rollout import journal
from harness.rundir import RunDir


@dataclass
class RunContext:
    """One run."""

    scenario: Scenario
    run: RunDir
    run_id: str
    manifest: dict[str, Any]
    cancel: threading.Event = field(default_factory=threading.Event)
    host: HostFacts | None = None
    secrets: list[str] = field(default_factory=list)
    allow_unpinned: bool = False
    scenario_dir: Path | None = None  # relative paths in the scenario (trace files) resolve here
    say: Any = print  # callable(str): progress output

    @property
    def arms_journal(self) -> Path:
        return self.run.root / "arms.jsonl"

    def record_arm(self, arm: str, event: str, **fields: Any) -> None:
        """Append an arm event (starting, ready, completed, failed, interrupted) to arms.jsonl."""
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        journal.append(self.arms_journal, {"arm": arm, "event": event, "at": at, **fields})

    def record_step(self, entry: dict[str, Any]) -> None:
        """Append a finished step (or warm-up) to steps.jsonl."""
        journal.append(self.run.steps, entry)

    def save_manifest(self) -> None:
        """Rewrite manifest.json atomically."""
        journal.write_json_atomic(self.run.manifest, self.manifest)
