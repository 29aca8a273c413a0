"""Copy a server's log stream to a file line by line, secrets redacted, keeping the last lines in memory.

A background thread reads byte chunks from a stream (e.g. ``container.logs(stream=True, follow=True)``), splits
them into lines, redacts each line and appends it to the log file. The stream ends when the server ends; ``finish``
waits a bounded time and then closes the stream so no thread is left behind.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from harness.secrets.redact import Redactor

TAIL_LINES = 500


class LogPump:
    """Streams log chunks from ``open_stream()`` into ``path``; thread-safe tail of the last lines."""

    def __init__(self, path: Path, redactor: Redactor, open_stream: Callable[[], Iterable[bytes]],
                 *, keep_lines: int = TAIL_LINES) -> None:
        self.path = path
        self._redact = redactor
        self._open_stream = open_stream
        self._lines: deque[str] = deque(maxlen=keep_lines)
        self._lock = threading.Lock()
        self._stream: Any = None
        self._partial = b""
        self._received = False
        self.error: str | None = None
        self._thread = threading.Thread(target=self._run, name=f"logpump:{path.name}", daemon=True)

    def start(self) -> None:
        """Start copying in the background."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._thread.start()

    def tail(self, lines: int = 40) -> list[str]:
        """The last ``lines`` lines seen (redacted)."""
        with self._lock:
            kept = list(self._lines)
            partial = self._partial
        if partial:
            kept.append(self._redact(partial.decode("utf-8", errors="replace")))
        return kept[-lines:] if lines > 0 else []

    def copied_any(self) -> bool:
        """True once the stream delivered at least one byte."""
        return self._received

    def drain(self, timeout_s: float = 2.0) -> None:
        """Wait (bounded) for a stream whose server has ended to deliver its last lines."""
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def finish(self, timeout_s: float = 5.0) -> None:
        """Wait (bounded) for the stream to end, then close it and write any unterminated last line."""
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        if self._thread.is_alive():
            self._close_stream()
            self._thread.join(2.0)
        with self._lock:
            rest, self._partial = self._partial, b""
        if rest:
            self._write([rest])

    def copy_all(self, read_all: Callable[[], bytes]) -> None:
        """Write a whole log at once (when streaming delivered nothing, e.g. the stream could not be opened)."""
        data = read_all()
        if data:
            self._received = True
            lines = data.split(b"\n")
            if lines and lines[-1] == b"":
                lines.pop()
            self._write(lines)

    # --- internals ---------------------------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._stream = self._open_stream()
            for chunk in self._stream:
                if not chunk:
                    continue
                self._received = True
                with self._lock:
                    data = self._partial + bytes(chunk)
                    *complete, self._partial = data.split(b"\n")
                if complete:
                    self._write(complete)
        except Exception as exc:  # the stream breaks when the container is removed; note it, never raise
            self.error = f"{type(exc).__name__}: {exc}"

    def _write(self, raw_lines: list[bytes]) -> None:
        text = [self._redact(line.decode("utf-8", errors="replace").rstrip("\r")) for line in raw_lines]
        with self._lock:
            self._lines.extend(text)
            with self.path.open("a", encoding="utf-8") as fh:
                fh.write("".join(f"{line}\n" for line in text))

    def _close_stream(self) -> None:
        close = getattr(self._stream, "close", None)
        if callable(close):
            with contextlib.suppress(Exception):  # closing a broken socket may raise; the thread ends anyway
                close()
