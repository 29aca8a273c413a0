"""String field types for names the harness prints, files by, and compares: no control characters, no stray blanks.

A name such as ``"baseline\\n"`` (a YAML ``|`` block, a copy-paste) looks like ``baseline`` in every report but is
another arm; a name with an escape sequence rewrites the terminal that shows it. :data:`Name` (scenario, request
class and rule names, model ids) refuses control characters (C0, C1, DEL, Unicode bidi overrides) and leading or
trailing whitespace; :data:`PathText` (file paths) refuses control characters only; :data:`EnvName` is a
POSIX environment variable name.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def no_control(value: str) -> str:
    """``value`` unchanged, or ValueError naming the first control character and where it is."""
    found = _CONTROL.search(value)
    if found is not None:
        raise ValueError(f"contains the control character {found.group(0)!r} at position {found.start()}; "
                         "use printable characters only")
    return value


def clean_name(value: str) -> str:
    """``value`` unchanged if it has no control character and no leading or trailing whitespace."""
    no_control(value)
    if value != value.strip():
        raise ValueError("has leading or trailing whitespace; remove it")
    return value


def env_name(value: str) -> str:
    """A POSIX environment variable name (letters, digits and '_', not starting with a digit)."""
    if not _ENV_NAME.fullmatch(value):
        raise ValueError("an environment variable name is letters, digits and '_', not starting with a digit")
    return value


Name = Annotated[str, AfterValidator(clean_name)]
PathText = Annotated[str, AfterValidator(no_control)]
EnvName = Annotated[str, AfterValidator(env_name)]
