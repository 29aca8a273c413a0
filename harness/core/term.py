"""Text safe to print on a terminal: control characters from input the harness did not author are made visible.

A scenario name, a server's model id or an error message can carry ANSI/OSC escape sequences (``\\x1b]...``,
``\\x1b[2J``) that would rewrite the user's terminal, or a carriage return that hides what came before. Every such
character (C0 and C1 controls, DEL, and the Unicode bidi overrides) is replaced by its ``\\xNN`` / ``\\uNNNN``
escape, so the text stays readable and nothing is executed. Newlines and tabs are kept only when asked.
"""

from __future__ import annotations

import re

_BIDI = "\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}]")
_UNSAFE_ONE_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(text: object, *, multiline: bool = False) -> str:
    """``text`` with every control character shown as an escape; newlines and tabs kept when ``multiline``."""
    pattern = _UNSAFE if multiline else _UNSAFE_ONE_LINE
    return pattern.sub(_escape, str(text))
