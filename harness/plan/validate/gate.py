"""``harness run``'s use of the validation: before the first arm, rejected arms stop the run (exit 2)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from harness.config.scenario import Scenario
from harness.plan.validate.runner import ValidateOptions, validate_scenario, validation_checks
from harness.schema.summary import CheckItem

RESULT_FILE = "validation.json"


def validation_gate(scenario: Scenario, opts: ValidateOptions, run_root: Path,
                    say: Callable[[str], object] = print) -> tuple[list[CheckItem], str | None]:
    """Validate every arm, write ``validation.json``; the message to stop with when an arm is rejected."""
    if scenario.engine.kind == "sim":
        return [], None
    say("validating every arm with the engine's own code (--no-validate skips this)")
    results = validate_scenario(scenario, opts)
    (run_root / RESULT_FILE).write_text(json.dumps([r.model_dump(mode="json") for r in results], indent=2),
                                        encoding="utf-8")
    items = validation_checks(results)
    rejected = [c for c in items if c.level == "error"]
    if not rejected:
        return items, None
    lines = "\n".join(f"  {c.arm}: {c.message}" for c in rejected)
    return items, (f"the engine rejected {len(rejected)} arm(s) before any server started:\n{lines}\n"
                   "fix the scenario (or pass --no-validate to launch anyway)")
