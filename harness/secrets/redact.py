"""Secrets never reach results, logs, reports or the terminal: the one redaction path of the harness.

What is secret:

* the value of an environment variable whose name contains TOKEN, KEY, SECRET, PASSWORD, PASSWD, CREDENTIAL or
  AUTH (any case), in the harness's environment or the server's;
* the value of a secret-looking flag on any command line (``--api-key``, ``--hf-token``; the rule is in
  :mod:`harness.secrets.flags`);
* the secrets inside any other argument and on shell commands (JSON under secret keys, URL credentials,
  ``key=value`` pairs, credential headers, tools' password options: :mod:`harness.secrets.forms`,
  :mod:`harness.secrets.shell`);
* literal values in ``engine.env`` (see :mod:`harness.config.secret_values`).

A :class:`Redactor` replaces each known value -- and its base64 and URL-encoded forms, for text the harness did
not author such as server logs -- by ``***``, and masks in free text what is a secret by its form alone: the value
of any secret-looking ``--flag value``, URL userinfo and secret query parameters, ``Authorization:``-style headers
(:func:`harness.secrets.forms.mask_text`). Manifests record environment variable names only, never values.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

from harness.secrets.flags import mask_flags_in_text
from harness.secrets.forms import mask_text
from harness.secrets.names import MASK, is_secret_name

__all__ = ["MASK", "Redactor", "encoded_forms", "is_secret_name", "redact_env", "secret_values"]

_MIN_SECRET_LEN = 4  # shorter values would mask ordinary words
_MAX_DEPTH = 64  # nesting of the JSON-like objects :meth:`Redactor.deep` walks


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


def encoded_forms(value: str) -> set[str]:
    """``value`` and the forms it takes when encoded: base64 (standard and URL-safe, with and without padding)
    and URL encoding (``%XX``, ``+`` for spaces)."""
    raw = value.encode("utf-8")
    forms = {value, quote(value, safe=""), quote_plus(value, safe=""), quote(value)}
    for encoded in (base64.b64encode(raw).decode("ascii"), base64.urlsafe_b64encode(raw).decode("ascii")):
        forms |= {encoded, encoded.rstrip("=")}
    return {f for f in forms if f}


class Redactor:
    """Replaces known secret values (and their encoded forms) and secret flag values in text."""

    def __init__(self, secrets: Iterable[str]) -> None:
        values = {s for s in secrets if len(s) >= _MIN_SECRET_LEN}
        forms = sorted({f for v in values for f in encoded_forms(v) if len(f) >= _MIN_SECRET_LEN}, key=len,
                       reverse=True)
        self._pattern = re.compile("|".join(re.escape(v) for v in forms)) if forms else None

    @classmethod
    def from_env(cls, *envs: Mapping[str, str]) -> Redactor:
        """A redactor for the secrets in these environments and the process environment."""
        return cls(secret_values(*envs))

    def __call__(self, text: str) -> str:
        if self._pattern is not None:
            text = self._pattern.sub(MASK, text)
        return mask_text(mask_flags_in_text(text))

    def deep(self, obj: Any, _depth: int = 0) -> Any:
        """A copy of a JSON-like object (dicts, lists, strings) with every string redacted; keys are kept."""
        if isinstance(obj, str):
            return self(obj)
        if _depth >= _MAX_DEPTH:
            return MASK  # nothing this deep is written by the harness; never let it through unread
        if isinstance(obj, dict):
            return {k: self.deep(v, _depth + 1) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.deep(v, _depth + 1) for v in obj]
        return obj


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env`` safe to record: secret-looking values masked."""
    return {k: (MASK if is_secret_name(k) else v) for k, v in env.items()}
