"""Load a scenario file: YAML -> overrides -> validation, with one clear message per problem (never a traceback)."""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from harness.config.errors import explain
from harness.config.errors import format_loc as _format_loc
from harness.config.scenario import Scenario

MAX_SCENARIO_BYTES = 4 * 1024 * 1024
MAX_PROBLEMS_SHOWN = 20


class ScenarioError(Exception):
    """A scenario that cannot be used; ``str()`` names the file, the field path and what would be valid."""

    def __init__(self, source: str, problems: Sequence[tuple[str, str]]) -> None:
        self.source = source
        self.problems = list(problems)
        lines = [f"{source}: {path}: {msg}" if path else f"{source}: {msg}" for path, msg in self.problems]
        super().__init__("\n".join(lines))


def format_loc(loc: Iterable[int | str]) -> str:
    """Turn a pydantic error location into a path like ``arms[1].offload.cpu_bytes_to_use``."""
    return _format_loc(loc)


try:  # libyaml's parser is ~10x faster than the pure-Python one; both construct only plain data
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]


class _UniqueKeyLoader(_SafeLoader):
    """PyYAML's safe loader, but a key given twice in one mapping is an error (PyYAML keeps the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"key {key!r} appears twice in the same mapping (keep one)", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _parse_yaml(text: str, source: str) -> Any:
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass: no arbitrary objects
    except RecursionError:
        raise ScenarioError(source, [("", "malformed YAML: nested too deeply")]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ScenarioError(source, [(where, f"malformed YAML: {problem}")]) from None


def _apply_override(data: dict[str, Any], assignment: str) -> None:
    key, sep, raw = assignment.partition("=")
    if not sep or not key:
        raise ScenarioError("--set", [(assignment, "expected KEY=VALUE, e.g. steps.levels[0].duration_s=5")])
    try:
        value = yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError:
        raise ScenarioError("--set", [(key, f"value {raw!r} is not valid YAML; quote strings, e.g. "
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
        problems = [explain(dict(e)) for e in errors[:MAX_PROBLEMS_SHOWN]]
        if len(errors) > MAX_PROBLEMS_SHOWN:
            problems.append(("", f"... and {len(errors) - MAX_PROBLEMS_SHOWN} more problems"))
        raise ScenarioError(source, problems) from None
    scenario.set_source_file(source)
    return scenario


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
