"""The two things every secret rule shares: which variable names hold secrets, and the mask that replaces a value."""

from __future__ import annotations

import re

MASK = "***"
_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """True when an environment variable name looks like it holds a secret."""
    return bool(_SECRET_NAME.search(name))
