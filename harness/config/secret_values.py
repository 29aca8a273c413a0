"""The secrets a scenario carries: secret flag values on its command lines and literal ``engine.env`` values.

Looked at in ``engine`` and in every arm's engine overrides (``arms[].engine``):

* values of secret-looking flags in ``extra_args`` and ``sim_args`` (rule: :mod:`harness.secrets.flags`);
* literal ``engine.env`` values and ``${NAME:-default}`` defaults: every one of a secret-looking variable, and,
  since a variable's name need not say it is secret, every other of at least 8 characters (shorter ones such as
  ``DEBUG`` or ``1`` would mask ordinary words in server logs; none is ever recorded: the run's scenario.yaml,
  the manifest and compose files name variables only);
* the values ``${NAME}`` references to secret-looking variables resolve to (the process environment).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from pydantic import ValidationError

from harness.config.engine import EngineSpec
from harness.config.env_refs import parse_reference
from harness.config.external import command_secret_values
from harness.config.scenario import Scenario
from harness.secrets.flags import REFERENCE, secret_flag_values
from harness.secrets.redact import Redactor, is_secret_name, secret_values

MIN_PLAIN_LITERAL_LEN = 8


def engines_of(scenario: Scenario) -> Iterator[EngineSpec]:
    """The engine spec and each arm's (where it overrides fields and still validates)."""
    yield scenario.engine
    for arm in scenario.arms:
        if arm.engine:
            try:
                yield scenario.engine_for(arm)
            except ValidationError:
                continue


def env_secret_values(env: dict[str, str]) -> list[str]:
    """Secret values of an ``engine.env`` mapping: literals and defaults (see the module docstring) and the values
    references to secret-looking variables resolve to."""
    out: list[str] = []
    for name, value in env.items():
        try:
            ref = parse_reference(value)
        except ValueError:  # malformed: the scenario is refused elsewhere; treat the text as a literal here
            ref = None
        if ref is None:
            if is_secret_name(name) or len(value) >= MIN_PLAIN_LITERAL_LEN:
                out.append(value)
            continue
        resolved = os.environ.get(ref.name, "")
        if resolved and (is_secret_name(name) or is_secret_name(ref.name)):
            out.append(resolved)
        if ref.default and (is_secret_name(name) or len(ref.default) >= MIN_PLAIN_LITERAL_LEN):
            out.append(ref.default)
    return out


def raw_engine_values(raw: dict[str, Any]) -> list[str]:
    """Secret values in a raw (unvalidated) engine mapping, e.g. an arm's override dict."""
    out: list[str] = []
    for key in ("extra_args", "sim_args"):
        args = raw.get(key)
        if isinstance(args, list):
            out += secret_flag_values([str(a) for a in args])
    env = raw.get("env")
    if isinstance(env, dict):
        out += env_secret_values({str(k): str(v) for k, v in env.items()})
    return out


def scenario_secret_values(scenario: Scenario) -> list[str]:
    """Every secret value the scenario itself carries (not the process environment's)."""
    found: list[str] = []
    for engine in engines_of(scenario):
        found += secret_flag_values([*engine.extra_args, *engine.sim_args])
        found += env_secret_values(engine.env)
    for arm in scenario.arms:
        found += raw_engine_values(arm.engine or {})
        found += command_secret_values(arm.server)
    return sorted(set(found), key=len, reverse=True)


def scenario_redactor(scenario: Scenario) -> Redactor:
    """The redactor for everything printed or written about this scenario (plus the process environment)."""
    return Redactor([*secret_values(), *scenario_secret_values(scenario)])


def without_references(values: list[str]) -> list[str]:
    """``values`` less unresolved ``${NAME}`` references (a reference names a secret, it is not one)."""
    return [v for v in values if not REFERENCE.match(v)]
