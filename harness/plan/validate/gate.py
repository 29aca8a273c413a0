"""``harness run``'s use of the validation, before the first arm: rejected arms stop the run (exit 2), so do the
guards on what the engine resolved, and with ``--require-validation`` so does an arm that could not be checked.

Whatever happens, ``validation.json`` says what was validated (:mod:`harness.rundir.validation`), so the report can
say so at its top.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.config.scenario import Scenario
from harness.plan.validate.runner import ValidateOptions, validate_scenario, validation_items
from harness.rundir.validation import record_of, write_validation
from harness.schema.summary import CheckItem
from harness.schema.validation import ValidationRecord, unvalidated


def validation_gate(scenario: Scenario, opts: ValidateOptions | None, path: Path, *, require: bool = False,
                    say: Callable[[str], object] = print) -> tuple[list[CheckItem], str | None]:
    """Validate every arm and write ``path``; the message to stop with (exit 2), or None to go on."""
    if scenario.engine.kind == "sim":
        write_validation(path, ValidationRecord(state="not-applicable", reason="the simulated engine has no code "
                                                "of its own to validate against"))
        return [], None
    if scenario.engine.effective_launcher == "external":
        write_validation(path, ValidationRecord(state="not-applicable", reason="servers you run (launcher: "
                                                "external): the harness launches nothing, and checks each server's "
                                                "live configuration instead (live_config/)"))
        return [], None
    if opts is None:
        write_validation(path, ValidationRecord(state="skipped", reason="--no-validate: the arms were not checked "
                                                "by the engine's own code"))
        if require:
            return [], "--require-validation and --no-validate contradict each other: drop one"
        say("NOT VALIDATED: --no-validate skips the engine's own check of every arm")
        return [], None
    say("validating every arm with the engine's own code (--no-validate skips this)")
    results = validate_scenario(scenario, opts)
    write_validation(path, record_of(results))
    items = validation_items(scenario, results)
    errors = [c for c in items if c.level == "error"]
    if errors:
        lines = "\n".join(f"  {c.arm}: {c.message}" for c in errors)
        return items, (f"the engine's own validation stopped {len({c.arm for c in errors})} arm(s) before any server "
                       f"started:\n{lines}\nfix the scenario (or pass --no-validate to launch anyway)")
    missing = unvalidated(results)
    if missing and require:
        lines = "\n".join(f"  {r.arm}: {r.message}" for r in missing)
        return items, (f"--require-validation: {len(missing)} arm(s) could not be validated by the engine's own "
                       f"code, so what the engine will run is unknown:\n{lines}\nmake the check runnable (the "
                       "pinned image present, the model's config.json reachable: --validate-model DIR) or drop "
                       "--require-validation")
    if missing:
        say(f"NOT VALIDATED: {len(missing)} arm(s) could not be checked by the engine's own code "
            "(--require-validation would stop here)")
    return items, None
