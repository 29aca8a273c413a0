"""Load a scenario file: YAML -> overrides -> validation, with one clear message per problem (never a traceback)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from harness.config.errors import explain, may_hold_secret
from harness.config.errors import format_loc as _format_loc
from harness.config.scenario import Scenario
from harness.core.input_files import InputFileError, read_text
from harness.core.safe_yaml import YamlInputError, load_yaml
from harness.core.term import safe_text

MAX_SCENARIO_BYTES = 4 * 1024 * 1024
MAX_PROBLEMS_SHOWN = 20


class ScenarioError(Exception):
    """A scenario that cannot be used; ``str()`` names the file, the field path and what would be valid."""

    def __init__(self, source: str, problems: Sequence[tuple[str, str]]) -> None:
        self.source = source
        self.problems = list(problems)
        shown = safe_text(source)  # a key, a value or a file name may carry a newline or an escape sequence
        lines = [f"{shown}: {safe_text(path)}: {safe_text(msg)}" if path else f"{shown}: {safe_text(msg)}"
                 for path, msg in self.problems]
        super().__init__("\n".join(lines))


def format_loc(loc: Iterable[int | str]) -> str:
    """Turn a pydantic error location into a path like ``arms[1].offload.cpu_bytes_to_use``."""
    return _format_loc(loc, Scenario)


def _parse_yaml(text: str, source: str) -> Any:
    try:
        return load_yaml(text)
    except YamlInputError as exc:
        raise ScenarioError(source, [(exc.where, exc.problem)]) from None


def _may_show(key: str) -> bool:
    """An override's value may be echoed in an error (see :func:`harness.config.errors.may_hold_secret`)."""
    return not may_hold_secret(key.replace("]", "").replace("[", ".").split("."))


def _apply_override(data: dict[str, Any], assignment: str) -> None:
    key, sep, raw = assignment.partition("=")
    if not sep or not key:
        shown = assignment if _may_show(assignment) else "(not shown: it may hold a secret)"
        raise ScenarioError("--set", [(shown, "expected KEY=VALUE, e.g. steps.levels[0].duration_s=5")])
    try:
        value = load_yaml(raw) if raw else ""
    except YamlInputError:
        what = f"value {raw!r}" if _may_show(key) else "the value (not shown: it may hold a secret)"
        raise ScenarioError("--set", [(key, f"{what} is not valid YAML; quote strings, e.g. "
                                           f"{key}='\"...\"'")]) from None
    node: Any = data
    parts = key.replace("]", "").replace("[", ".").split(".")
    if any(not part for part in parts):
        raise ScenarioError("--set", [(key, "empty part in the key; use dots and [N], e.g. arms[1].offload.kind")])
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            try:
                idx = int(part)
                if last:
                    node[idx] = value
                else:
                    node = node[idx]
            except (ValueError, IndexError):
                raise ScenarioError("--set", [(key, f"{part!r} is not a valid index")]) from None
        elif isinstance(node, dict):
            if last:
                node[part] = value
            else:
                node = node.setdefault(part, {})
        else:
            raise ScenarioError("--set", [(key, f"cannot descend into {part!r}")])


def load_scenario_text(text: str, source: str = "<scenario>", overrides: Sequence[str] = ()) -> Scenario:
    """Parse and validate scenario YAML text."""
    data = _parse_yaml(text, source)
    if not isinstance(data, dict):
        raise ScenarioError(source, [("", "the file must be a YAML mapping with the keys name, engine, arms, "
                                          "workload and steps (see the examples in scenarios/)")])
    for assignment in overrides:
        _apply_override(data, assignment)
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        problems = [explain(dict(e), Scenario) for e in errors[:MAX_PROBLEMS_SHOWN]]
        if len(errors) > MAX_PROBLEMS_SHOWN:
            problems.append(("", f"... and {len(errors) - MAX_PROBLEMS_SHOWN} more problems"))
        raise ScenarioError(source, problems) from None
    scenario.set_source_file(source)
    return scenario


def load_scenario(path: Path, overrides: Sequence[str] = ()) -> Scenario:
    """Read and validate a scenario file."""
    source = str(path)
    try:
        text = read_text(path, max_bytes=MAX_SCENARIO_BYTES, what="scenario file")
    except InputFileError as exc:
        raise ScenarioError(source, [(f"line {exc.line}" if exc.line else "", exc.problem)]) from None
    return load_scenario_text(text, source, overrides)


def scenario_hash(scenario: Scenario) -> str:
    """A stable hash of the resolved scenario (recorded in the manifest)."""
    canonical = scenario.model_dump_json(exclude_none=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
