"""The run's ``scenario.yaml``: the scenario as run, with every secret written as a ``${NAME}`` reference.

* ``engine.env`` (and ``arms[].engine.env``) values are recorded by name only: a literal becomes ``${NAME}``, a
  reference ``${SRC}`` stays, ``${SRC:-default}`` becomes ``${SRC}`` (the default is a value).
* A secret flag's value in ``extra_args`` / ``sim_args`` becomes ``${NAME}``, NAME being the variable that holds it
  in the harness's environment, or the flag's name in upper snake case (``--api-key`` -> ``API_KEY``).
* Anything else equal to a secret is masked (``***``): a secret inside a JSON or URL value, on a server command;
  ``--resume`` refuses such a field (exit 2 naming it) rather than run ``***`` in its place.

``harness report`` reads the file as it is. ``harness run --resume`` reads it back with
:func:`load_recorded_scenario`: every variable it references must be set (else exit 2 naming the variable and the
field), and flag references are resolved from the environment, as :func:`resolve_flag_references` does for a new
run whose scenario writes ``--api-key=${MY_KEY}``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from harness.config import Scenario, ScenarioError, load_scenario
from harness.config.env_refs import parse_reference, unset_references
from harness.config.secret_values import masked_fields, scenario_redactor
from harness.secrets.flags import REFERENCE, is_secret_flag, reference_name, replace_secret_values

_ARG_FIELDS = ("extra_args", "sim_args")


def _variable(key: str, value: object) -> str:
    """The variable an ``engine.env`` entry is recorded as: its reference's (default dropped), else its own."""
    try:
        ref = parse_reference(str(value))
    except ValueError:
        ref = None
    return ref.name if ref is not None else key


def _record_engine(engine: dict[str, Any]) -> dict[str, Any]:
    out = dict(engine)
    env = out.get("env")
    if isinstance(env, dict):
        out["env"] = {str(k): f"${{{_variable(str(k), v)}}}" for k, v in env.items()}
    for key in _ARG_FIELDS:
        args = out.get(key)
        if isinstance(args, list):
            out[key] = replace_secret_values([str(a) for a in args],
                                             lambda flag, value: f"${{{reference_name(flag, value)}}}")
    return out


def recorded_scenario_yaml(scenario: Scenario) -> str:
    """The text of the run's scenario.yaml: the resolved scenario with secrets as references."""
    data = scenario.model_dump(mode="json", exclude_none=True)
    data["engine"] = _record_engine(data["engine"])
    for arm in data.get("arms", []):
        if arm.get("engine"):
            arm["engine"] = _record_engine(arm["engine"])
    return yaml.safe_dump(scenario_redactor(scenario).deep(data), sort_keys=False)


def _flag_reference_positions(args: Sequence[str]) -> list[tuple[int, str, str]]:
    """(index, variable, text before the reference) of each ``${NAME}`` given as a secret flag's value."""
    out: list[tuple[int, str, str]] = []
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        inline = REFERENCE.match(value) if eq and arg.startswith("--") and is_secret_flag(flag) else None
        if inline is not None:
            out.append((i, inline.group(1), f"{flag}="))
            continue
        before = args[i - 1] if i > 0 else ""
        separate = REFERENCE.match(arg) if before.startswith("--") and "=" not in before and is_secret_flag(before) \
            else None
        if separate is not None:
            out.append((i, separate.group(1), ""))
    return out


def _problem(field: str, name: str) -> tuple[str, str]:
    return field, (f"${{{name}}} is not set: export {name} (the value is never written to results, so it must "
                   "come from the environment)")


def _resolve_args(args: list[str], field: str, problems: list[tuple[str, str]]) -> list[str]:
    out = list(args)
    for i, name, prefix in _flag_reference_positions(args):
        value = os.environ.get(name)
        if value is None:
            problems.append(_problem(f"{field}[{i}]", name))
        else:
            out[i] = prefix + value
    return out


def _source(scenario: Scenario) -> str:
    return scenario.source_file or "<scenario>"


def _resolved(scenario: Scenario, problems: list[tuple[str, str]]) -> Scenario:
    """The scenario with secret flag references resolved; unset variables are added to ``problems``."""
    engine = scenario.engine
    update = {key: _resolve_args(list(getattr(engine, key)), f"engine.{key}", problems) for key in _ARG_FIELDS}
    arms = []
    for index, arm in enumerate(scenario.arms):
        over = dict(arm.engine or {})
        for key in _ARG_FIELDS:
            if isinstance(over.get(key), list):
                over[key] = _resolve_args([str(a) for a in over[key]], f"arms[{index}].engine.{key}", problems)
        arms.append(arm.model_copy(update={"engine": over}) if arm.engine else arm)
    if update == {key: list(getattr(engine, key)) for key in _ARG_FIELDS} and arms == list(scenario.arms):
        return scenario
    resolved = scenario.model_copy(update={"engine": engine.model_copy(update=update), "arms": arms})
    resolved.set_source_file(scenario.source_file)
    return resolved


def _env_problems(scenario: Scenario) -> list[tuple[str, str]]:
    envs: list[tuple[str, dict[str, str]]] = [("engine.env", scenario.engine.env)]
    envs += [(f"arms[{i}].engine.env", {str(k): str(v) for k, v in a.engine["env"].items()})
             for i, a in enumerate(scenario.arms) if isinstance((a.engine or {}).get("env"), dict)]
    return [_problem(f"{field}.{key}", name) for field, env in envs for key, name in unset_references(env)]


def resolve_flag_references(scenario: Scenario) -> Scenario:
    """The scenario with each secret flag value written ``${NAME}`` taken from the environment (exit 2 if unset)."""
    problems: list[tuple[str, str]] = []
    resolved = _resolved(scenario, problems)
    if problems:
        raise ScenarioError(_source(scenario), problems)
    return resolved


def load_recorded_scenario(path: Path) -> Scenario:
    """A run directory's scenario.yaml, ready to resume: every referenced variable must be set (one exit-2 error
    names all that are not), and secret flag values are taken from the environment."""
    scenario = load_scenario(path)
    problems = _env_problems(scenario) + masked_fields(scenario)  # a masked secret is never run as "***"
    resolved = _resolved(scenario, problems)
    if problems:
        raise ScenarioError(_source(scenario), problems)
    return resolved
