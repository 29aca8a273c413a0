"""How deep a JSON text nests, found without parsing it: Python's ``json`` recurses once per ``[``/``{`` and a
line nested 100,000 deep raises RecursionError (or worse) in whatever parses it. Readers of user JSON ask
:func:`json_too_deep` first and refuse the text with a message instead."""

from __future__ import annotations

import re

JSON_DEPTH_LIMIT = 64
"""Nesting allowed by default (the harness's own JSON inputs nest at most 4 deep)."""

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def json_too_deep(text: str, limit: int = JSON_DEPTH_LIMIT) -> bool:
    """Whether a JSON text nests ``[``/``{`` deeper than ``limit`` (brackets inside strings not counted). Cheap
    for ordinary lines: the scan runs only where the number of opening brackets exceeds the limit."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for char in _STRING.sub('""', text):  # bounded: the line's length (capped by the reader)
        if char in "[{":
            depth += 1
            if depth > limit:
                return True
        elif char in "]}":
            depth -= 1
    return False
