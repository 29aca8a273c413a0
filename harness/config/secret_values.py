"""The secrets a scenario carries: secret flag values on its command lines and literal ``engine.env`` values.

Looked at in ``engine`` and in every arm's engine overrides (``arms[].engine``):

* values of secret-looking flags in ``extra_args`` and ``sim_args`` (rule: :mod:`harness.secrets.flags`) and the
  secrets inside their other arguments (JSON under secret keys, URL credentials: :mod:`harness.secrets.forms`);
* the secrets on external arms' ``restart_command`` / ``clear_cache_command`` (:mod:`harness.secrets.shell`);
* literal ``engine.env`` values and ``${NAME:-default}`` defaults: every one of a secret-looking variable, and,
  since a variable's name need not say it is secret, every other of at least 8 characters (shorter ones such as
  ``DEBUG`` or ``1`` would mask ordinary words in server logs; none is ever recorded: the run's scenario.yaml,
  the manifest and compose files name variables only);
* the values ``${NAME}`` references to secret-looking variables resolve to (the process environment).

:func:`masked_fields` names what a recorded scenario (a run's ``scenario.yaml``) holds masked, so that
``harness run --resume`` refuses it rather than run ``***`` in place of a secret.
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
from harness.secrets.flags import REFERENCE, argv_secret_values
from harness.secrets.redact import MASK, Redactor, is_secret_name, secret_values

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
            out += argv_secret_values([str(a) for a in args])
    env = raw.get("env")
    if isinstance(env, dict):
        out += env_secret_values({str(k): str(v) for k, v in env.items()})
    return out


def scenario_secret_values(scenario: Scenario) -> list[str]:
    """Every secret value the scenario itself carries (not the process environment's)."""
    found: list[str] = []
    for engine in engines_of(scenario):
        found += argv_secret_values([*engine.extra_args, *engine.sim_args])
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


_MASKED_WHY = ("was recorded with a secret masked inside it (***), so a resumed run cannot restore it; start a new "
               "run from the scenario file, or pass the secret through an environment variable")


def masked_fields(scenario: Scenario) -> list[tuple[str, str]]:
    """``(field, why)`` for each argument or server command of a recorded scenario that holds the mask where a
    secret was (a JSON or URL value, a shell command): it cannot be run again as it is."""
    out: list[tuple[str, str]] = []
    fields: list[tuple[str, list[Any]]] = [(f"engine.{key}", list(getattr(scenario.engine, key)))
                                           for key in ("extra_args", "sim_args")]
    for i, arm in enumerate(scenario.arms):
        over = arm.engine or {}
        fields += [(f"arms[{i}].engine.{key}", over[key]) for key in ("extra_args", "sim_args")
                   if isinstance(over.get(key), list)]
        for name in ("restart_command", "clear_cache_command"):
            command = getattr(arm.server, name, None) if arm.server is not None else None
            if command and MASK in command:
                out.append((f"arms[{i}].server.{name}", _MASKED_WHY))
    for field, args in fields:
        out += [(f"{field}[{j}]", _MASKED_WHY) for j, arg in enumerate(args) if MASK in str(arg)]
    return out
