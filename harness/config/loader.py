"""Load a scenario file: YAML -> overrides -> validation, with one clear message per problem (never a traceback)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from harness.config.arms import OFFLOAD_KINDS
from harness.config.scenario import Scenario

MAX_SCENARIO_BYTES = 4 * 1024 * 1024
_TAGS = set(OFFLOAD_KINDS)


class ScenarioError(Exception):
    """A scenario that cannot be used; ``str()`` names the file, the field path and what would be valid."""

    def __init__(self, source: str, problems: Sequence[tuple[str, str]]) -> None:
        self.source = source
        self.problems = list(problems)
        lines = [f"{source}: {path}: {msg}" if path else f"{source}: {msg}" for path, msg in self.problems]
        super().__init__("\n".join(lines))


def format_loc(loc: Iterable[int | str]) -> str:
    """Turn a pydantic error location into a path like ``arms[1].offload.cpu_bytes_to_use``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in _TAGS or part.startswith("function-"):
            continue  # discriminated-union tags and validator wrappers are not part of the user's path
        else:
            out += f".{part}" if out else part
    return out


def _explain(err: dict[str, Any]) -> str:
    msg = str(err.get("msg", "invalid value"))
    msg = msg.removeprefix("Value error, ")
    kind = err.get("type", "")
    if kind == "extra_forbidden":
        return "unknown key (check the spelling; see the scenario reference in README.md)"
    if kind == "missing":
        return "required field is missing"
    if kind == "union_tag_invalid":
        return f"unknown kind; valid kinds: {', '.join(OFFLOAD_KINDS)}"
    if "input" in err and kind not in ("model_type",) and not isinstance(err["input"], dict | list):
        return f"{msg} (got {err['input']!r})"
    return msg


def _apply_override(data: dict[str, Any], assignment: str) -> None:
    key, sep, raw = assignment.partition("=")
    if not sep or not key:
        raise ScenarioError("--set", [(assignment, "expected KEY=VALUE, e.g. steps.levels[0].duration_s=5")])
    value = yaml.safe_load(raw) if raw else ""
    node: Any = data
    parts = key.replace("]", "").replace("[", ".").split(".")
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
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ScenarioError(source, [(where, f"malformed YAML: {problem}")]) from None
    if not isinstance(data, dict):
        raise ScenarioError(source, [("", "the file must be a YAML mapping with keys name, engine, arms, workload, "
                                          "steps (see scenarios/demo-sim.yaml)")])
    for assignment in overrides:
        _apply_override(data, assignment)
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        problems = [(format_loc(e["loc"]), _explain(dict(e))) for e in exc.errors()]
        raise ScenarioError(source, problems) from None


def load_scenario(path: Path, overrides: Sequence[str] = ()) -> Scenario:
    """Read and validate a scenario file."""
    source = str(path)
    if not path.exists():
        raise ScenarioError(source, [("", "file not found")])
    if not path.is_file():
        raise ScenarioError(source, [("", "not a regular file")])
    size = path.stat().st_size
    if size > MAX_SCENARIO_BYTES:
        raise ScenarioError(source, [("", f"file is {size} bytes; scenarios are at most {MAX_SCENARIO_BYTES}")])
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(source, [("", f"cannot read: {exc}")]) from None
    return load_scenario_text(text, source, overrides)


def scenario_hash(scenario: Scenario) -> str:
    """A stable hash of the resolved scenario (recorded in the manifest)."""
    canonical = scenario.model_dump_json(exclude_none=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
