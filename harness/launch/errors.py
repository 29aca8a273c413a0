"""Find the engine's own reason for a failed start in its log: the root-cause exception line.

A vLLM start-up failure ends with a long chain of tracebacks (worker -> engine core -> API server) whose last
lines say only "Engine core initialization failed. See root cause above"; the 40-line tail a report shows misses
the cause. :func:`engine_error` scans the whole log for exception lines, drops log-level prefixes, skips warnings and
generic wrappers, and returns the first real cause, e.g.
``Exception: CPU Offloading is currently only supported on CUDA-alike and XPU GPUs``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

# "<prefix>] SomeError: message" or a bare "module.SomeError: message" at the end of a traceback.
_EXC = re.compile(r"(?:^|[\]|:]\s)\s*((?:[A-Za-z_][\w]*\.)*[A-Za-z_]*(?:Error|Exception|Exit|Interrupt)\w*: .+)$")
_LEVEL = re.compile(r"\b(WARNING|WARN|INFO|DEBUG)\b")
# Wrappers that point elsewhere for the cause.
_GENERIC = ("See root cause above", "please check the stack trace above", "See stack trace",
            "Engine core initialization failed",
            "Worker failed with error", "leaked shared_memory", "Traceback (most recent call last)")
MAX_LEN = 500
MAX_LINES = 200_000


def engine_error(lines: Iterable[str]) -> str | None:
    """The first root-cause exception line in a server log (prefix removed), or None when there is none."""
    fallback: str | None = None
    for count, raw in enumerate(lines):
        if count >= MAX_LINES:
            break
        line = raw.rstrip()
        match = _EXC.search(line)
        if not match:
            continue
        prefix = line[: match.start(1)]
        if _LEVEL.search(prefix):
            continue  # a warning that merely mentions an exception
        text = match.group(1).strip()[:MAX_LEN]
        if any(g in text for g in _GENERIC):
            fallback = fallback or text
            continue
        return text
    return fallback


def engine_error_in_file(path: Path) -> str | None:
    """:func:`engine_error` over a log file; None when the file is missing or unreadable."""
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            return engine_error(fh)
    except OSError:
        return None
