"""The command line's error boundary: what an exception that reached ``harness.cli.main`` becomes.

Exit codes are :class:`harness.core.exit_codes.ExitCode`, and an error never exits 1 (CI reads 1 as a no-go verdict):

* an unexpected exception: one line on stderr, ``error: <type>: <message> (run with --debug or HARNESS_DEBUG=1
  for the traceback)``, exit 4; with ``--debug`` / ``HARNESS_DEBUG=1`` the traceback is printed too (still 4);
* Ctrl-C that reached the boundary (typer turns it into a silent exit 130): ``interrupted``, exit 130;
* a closed stdout (``harness plan ... | head``: click exits 1 on EPIPE): exit 4;
* ``sys.exit("message")``: the message, exit 4 (Python would exit 1);
* every other exit status passes unchanged (typer's usage errors are 2, verdicts 0/1/3/5, failures 4).

The message is cut to :data:`MAX_MESSAGE` characters and its control characters are made visible, so neither a
huge input echoed in an exception nor an escape sequence reaches the terminal.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import traceback

from harness.core.exit_codes import ExitCode
from harness.core.term import safe_text

DEBUG_ENV = "HARNESS_DEBUG"
MAX_MESSAGE = 300


def debug_enabled() -> bool:
    """``--debug`` was given (it sets the variable) or ``HARNESS_DEBUG`` is set to a true value."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def _say(line: str) -> None:
    with contextlib.suppress(OSError, ValueError):  # stderr closed too: the exit status still tells
        print(line, file=sys.stderr, flush=True)


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or during (bounded: at most 16 links)."""
    out: list[BaseException] = []
    node: BaseException | None = exc
    while node is not None and len(out) < 16:
        out.append(node)
        node = node.__cause__ or node.__context__
    return out


def short_message(exc: BaseException) -> str:
    """``<type>: <message>``, one line, at most :data:`MAX_MESSAGE` characters of message."""
    try:
        text = str(exc)
    except Exception:  # a broken __str__ must not break the boundary
        text = "(the message could not be shown)"
    text = " ".join(text.split())
    if len(text) > MAX_MESSAGE:
        text = text[: MAX_MESSAGE - 3] + "..."
    name = type(exc).__name__
    return safe_text(f"{name}: {text}" if text else name)


def unexpected(exc: BaseException) -> int:
    """Report an unexpected exception; the exit status (4)."""
    if debug_enabled():
        with contextlib.suppress(OSError, ValueError):
            traceback.print_exception(exc, file=sys.stderr)
    hint = "" if debug_enabled() else f" (run with --debug or {DEBUG_ENV}=1 for the traceback)"
    _say(f"error: {short_message(exc)}{hint}")
    return ExitCode.FAILED


def interrupted() -> int:
    """Report Ctrl-C that reached the boundary; the exit status (130)."""
    _say("interrupted (Ctrl-C): stopped")
    return ExitCode.INTERRUPTED


def exit_status(exc: SystemExit) -> int | None:
    """The status to exit with for a ``SystemExit`` that reached the boundary (see the module docstring)."""
    chain = _chain(exc)[1:]
    if exc.code == ExitCode.INTERRUPTED and any(isinstance(e, KeyboardInterrupt) for e in chain):
        return interrupted()
    if exc.code == 1 and any(isinstance(e, OSError) and e.errno == errno.EPIPE for e in chain):
        return ExitCode.FAILED  # the reader of stdout went away; nothing more can be shown there
    code = exc.code
    if isinstance(code, str):  # sys.exit("message") would print it and exit 1
        _say(f"error: {safe_text(code[:MAX_MESSAGE])}")
        return ExitCode.FAILED
    if isinstance(code, bool) or not isinstance(code, int | None):
        return ExitCode.FAILED
    return code
