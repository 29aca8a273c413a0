"""References to the harness's environment in ``engine.env``: ``${NAME}`` and ``${NAME:-default}``.

A value that is exactly ``${NAME}`` is the harness's own ``$NAME`` at launch (so a token is written as a
reference and never stored); ``${NAME:-default}`` takes ``default`` when ``NAME`` is unset or empty, as the shell
does. Any other value is literal, except that a value holding ``${`` without being one whole reference is refused
(``"${HF_TOKEN}x"``, ``"${HF_TOKEN"`` are typos that would reach the server verbatim).

Unset variables are not an error of the scenario file (``harness report`` reads a run's scenario.yaml where
the token is not set): :func:`unset_references` is checked by ``harness plan`` and by ``harness run`` before any
server starts (:mod:`harness.plan.checks.inputs`), and :func:`resolve_env` refuses them again at launch, so an unset
variable never silently becomes ``""``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator

_REF = re.compile(r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^}]*))?\}")


@dataclass(frozen=True)
class EnvRef:
    """A parsed reference: the variable and its default (``None``: the variable must be set)."""

    name: str
    default: str | None


class UnsetEnvError(ValueError):
    """``engine.env`` refers to a variable that is not set and has no default; the message names both."""


def parse_reference(value: str) -> EnvRef | None:
    """The reference ``value`` is, or ``None`` for a literal; ValueError for a malformed reference."""
    found = _REF.fullmatch(value)
    if found is not None:
        return EnvRef(found.group("name"), found.group("default"))
    if "${" in value:
        raise ValueError("holds '${' but is not one whole reference; write the value as ${NAME} or "
                         "${NAME:-default} (a variable of the harness's environment), or a literal without '${'")
    return None


def check_value(value: str) -> str:
    """Field validator: ``value`` unchanged when it is a literal or a well-formed reference."""
    parse_reference(value)
    return value


def unset_references(env: Mapping[str, str], environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """``(key, variable)`` for every ``${variable}`` in ``env`` that ``environ`` (default: ours) does not set."""
    source = os.environ if environ is None else environ
    out: list[tuple[str, str]] = []
    for key, value in env.items():
        ref = parse_reference(value)
        if ref is not None and ref.default is None and ref.name not in source:
            out.append((key, ref.name))
    return out


def resolve_env(env: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` with every reference replaced by its value; :class:`UnsetEnvError` for an unset variable."""
    source = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for key, value in env.items():
        ref = parse_reference(value)
        if ref is None:
            out[key] = value
        elif ref.name in source and (source[ref.name] or ref.default is None):
            out[key] = source[ref.name]
        elif ref.default is not None:
            out[key] = ref.default
        else:
            raise UnsetEnvError(f"engine.env.{key}: ${{{ref.name}}} is not set in the harness's environment; "
                                f"export {ref.name}, or write ${{{ref.name}:-default}}")
    return out


EnvValue = Annotated[str, AfterValidator(check_value)]
"""An ``engine.env`` value: a literal or one whole, well-formed reference."""
