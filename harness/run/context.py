"""State shared by the stages of one run: the scenario, the run directory, options, cancel event, journals.

The run's one redactor (:mod:`harness.secrets.redact`) lives here: it knows the environment's secrets, the values of
secret flags on the scenario's command lines and its literal ``engine.env`` values (:mod:`harness.config.secret_values`)
and is applied to every progress line, arm and step journal entry and the manifest; ``secrets`` (all of those
values) goes to the launchers, which mask them in the server logs they copy.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.config.scenario import Scenario
from harness.config.secret_values import scenario_secret_values, without_references
from harness.core.atomic import write_json_atomic
from harness.host.facts import HostFacts
from harness.rundir import journal
from harness.rundir.entries import ArmEvent, StepEntry
from harness.rundir.layout import RunDir
from harness.secrets.redact import Redactor


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
    say: Any = print  # callable(str): progress output (redacted once the context exists)
    redactor: Redactor = field(init=False)

    def __post_init__(self) -> None:
        known = without_references([*self.secrets, *scenario_secret_values(self.scenario)])
        self.secrets = sorted(set(known), key=len, reverse=True)
        self.redactor = Redactor(self.secrets)
        printer = self.say
        self.say = lambda message: printer(self.redactor(str(message)))

    def record_arm(self, arm: str, event: str, **fields: Any) -> None:
        """Append an arm event (starting, ready, attempt, completed, failed, interrupted, ...) to arms.jsonl
        (:class:`~harness.rundir.entries.ArmEvent`; ``fields`` are its other keys)."""
        at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        journal.append_arm_event(self.run, ArmEvent(arm=arm, event=event, at=at, **fields), self.redactor.deep)

    def record_step(self, entry: StepEntry) -> None:
        """Append a finished step (warm-up, drill phase, capacity probe) to steps.jsonl."""
        journal.append_step(self.run, entry, self.redactor.deep)

    def save_manifest(self) -> None:
        """Rewrite manifest.json atomically."""
        write_json_atomic(self.run.manifest, self.redactor.deep(self.manifest))
