"""The two ways reading or writing a run directory's reports fails: bad input (exit 2) and a write that failed
(exit 4: disk full, read-only, gone). Every message starts with the file it is about."""

from __future__ import annotations

from pathlib import Path


class ReportInputError(Exception):
    """The input is not a run directory, or one of its files is missing, unreadable or invalid (``PATH: why``)."""


class ReportWriteError(OSError):
    """A report file could not be written. ``written`` were replaced in this pass; ``unchanged`` (the failing file
    and those after it) are as they were before, since every file is replaced whole or not at all."""

    def __init__(self, exc: OSError, path: Path, written: list[Path], unchanged: list[Path]) -> None:
        super().__init__(exc.errno, exc.strerror or str(exc), str(path))
        self.path = path
        self.written = written
        self.unchanged = unchanged
