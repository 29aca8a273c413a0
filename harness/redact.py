"""Secrets never reach results, logs or reports: redaction of secret-looking environment values.

A variable is secret when its name contains TOKEN, KEY, SECRET, PASSWORD, PASSWD, CREDENTIAL or AUTH (any case).
Its value is replaced by ``***`` wherever the harness writes text it did not author (server logs, error messages)
and never written at all in manifests (only the variable names are recorded).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
MASK = "***"
_MIN_SECRET_LEN = 4  # shorter values would mask ordinary words


def is_secret_name(name: str) -> bool:
    """True when an environment variable name looks like it holds a secret."""
    return bool(_SECRET_NAME.search(name))


def secret_values(*envs: Mapping[str, str], include_process_env: bool = True) -> list[str]:
    """Values of secret-looking variables in the given mappings (and this process's environment)."""
    found: set[str] = set()
    sources: list[Mapping[str, str]] = list(envs)
    if include_process_env:
        sources.append(os.environ)
    for env in sources:
        for name, value in env.items():
            if is_secret_name(name) and len(value) >= _MIN_SECRET_LEN:
                found.add(value)
    return sorted(found, key=len, reverse=True)


class Redactor:
    """Replaces known secret values in text."""

    def __init__(self, secrets: Iterable[str]) -> None:
        values = sorted({s for s in secrets if len(s) >= _MIN_SECRET_LEN}, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(v) for v in values)) if values else None

    @classmethod
    def from_env(cls, *envs: Mapping[str, str]) -> Redactor:
        """A redactor for the secrets in these environments and the process environment."""
        return cls(secret_values(*envs))

    def __call__(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(MASK, text)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` safe to record: secret-looking values masked."""
    return {k: (MASK if is_secret_name(k) else v) for k, v in env.items()}
