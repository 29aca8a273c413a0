"""Open the files a user names (scenarios, traces, simulator profiles) without the traps of special files.

A path given on a command line or in a scenario can be a FIFO (``open`` blocks until a writer comes, forever),
``/dev/zero`` or another device (endless bytes, no newline: ``readline`` grows until MemoryError), a socket, a
directory, or a regular file far larger than any real input. :func:`open_regular` looks with ``os.stat`` before
opening, opens with ``O_NONBLOCK`` (a path swapped for a FIFO after the check still does not block), checks the
open descriptor again and refuses anything but a regular file under the caller's size cap. :func:`iter_lines`
reads lines of at most ``max_line_bytes`` and stops when the file grows past its cap while being read (``/proc``
files report size 0). Every refusal is an :class:`InputFileError` whose message starts with the path.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

MIB = 1 << 20


class InputFileError(ValueError):
    """A user-named file that the harness will not read; ``str()`` is ``PATH: why`` (``PATH:LINE: why``)."""

    def __init__(self, source: str, problem: str, line: int | None = None) -> None:
        super().__init__(f"{source}:{line}: {problem}" if line is not None else f"{source}: {problem}")
        self.source = source
        self.problem = problem
        self.line = line


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def _check(source: str, st: os.stat_result, max_bytes: int, what: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise InputFileError(source, f"is {_kind(st.st_mode)}, not a regular file; give the {what} as a file")
    if st.st_size > max_bytes:
        raise InputFileError(source, f"is {st.st_size} bytes; a {what} may be at most {_size(max_bytes)}")


def _size(nbytes: int) -> str:
    return f"{nbytes // MIB} MiB" if nbytes >= MIB else f"{nbytes} bytes"


def check_regular(path: Path | str, *, max_bytes: int, what: str = "file") -> None:
    """Refuse (without opening it) anything at ``path`` but a regular file of at most ``max_bytes``."""
    source = str(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputFileError(source, "file not found") from None
    except OSError as exc:
        raise InputFileError(source, f"cannot read ({exc.strerror or exc})") from None
    _check(source, st, max_bytes, what)


def open_regular(path: Path | str, *, max_bytes: int, what: str = "file") -> BinaryIO:
    """``path`` opened for binary reading, after :func:`check_regular` and the same check on the open file."""
    check_regular(path, max_bytes=max_bytes, what=what)
    source = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise InputFileError(source, f"cannot read ({exc.strerror or exc})") from None
    try:
        _check(source, os.fstat(fd), max_bytes, what)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_text(path: Path | str, *, max_bytes: int, what: str = "file") -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes`` (checked again while reading)."""
    source = str(path)
    with open_regular(path, max_bytes=max_bytes, what=what) as handle:
        try:
            data = handle.read(max_bytes + 1)
        except OSError as exc:
            raise InputFileError(source, f"cannot read ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        raise InputFileError(source, f"grew past {_size(max_bytes)} while being read; a {what} may be at most "
                             f"{_size(max_bytes)}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputFileError(source, f"cannot read: not UTF-8 text ({exc.reason} at byte {exc.start})", line) from None


def iter_lines(handle: BinaryIO, source: str, *, max_line_bytes: int, max_bytes: int) -> Iterator[tuple[int, bytes]]:
    """``(line number, raw line)`` for each line (1-based); a line over ``max_line_bytes``, or more than
    ``max_bytes`` in all, is an :class:`InputFileError` naming the line."""
    total = 0
    line_no = 0
    while total <= max_bytes:  # bounded: every pass reads at least one byte, at most max_bytes + 1 in all
        try:
            raw = handle.readline(max_line_bytes + 1)
        except OSError as exc:
            raise InputFileError(source, f"cannot read ({exc.strerror or exc})", line_no + 1) from None
        if not raw:
            return
        line_no += 1
        total += len(raw)
        if len(raw) > max_line_bytes:
            raise InputFileError(source, f"the line is longer than {_size(max_line_bytes)}", line_no)
        yield line_no, raw
    raise InputFileError(source, f"grew past {_size(max_bytes)} while being read")
