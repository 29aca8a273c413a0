"""Progress output during a run: one line per event, and the outcome at the end."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.markup import escape

_VERDICT_STYLE = {"go": "bold green", "no-go": "bold red", "hold": "bold yellow", "failed": "bold red"}


class LiveOutput:
    """Prints timestamped progress lines (arm, step, elapsed, running figures) to the console."""

    def __init__(self, console: Console, *, quiet: bool = False) -> None:
        self.console = console
        self.quiet = quiet
        self.started = time.monotonic()

    def say(self, message: str) -> None:
        """One progress line, prefixed with the elapsed time."""
        if self.quiet:
            return
        elapsed = time.monotonic() - self.started
        self.console.print(f"[dim]{elapsed:7.1f}s[/] {escape(message)}", highlight=False, soft_wrap=True)

    def finish(self, result: Any) -> None:
        """The verdict, where the report is, and what to do next."""
        summary = result.summary
        if summary is None:
            self.console.print(escape(result.message), highlight=False)
            if result.run_dir is not None:
                self.console.print(f"run directory: {escape(str(result.run_dir))}")
            return
        style = _VERDICT_STYLE.get(summary.verdict, "bold")
        sim = " [bold magenta]SIMULATED[/]" if summary.simulated else ""
        self.console.print(f"\nverdict: [{style}]{summary.verdict.upper()}[/]{sim} — {escape(summary.verdict_reason)}",
                           highlight=False)
        for arm in summary.arms:
            first = arm.reasons[0] if arm.reasons else ""
            self.console.print(f"  {escape(arm.name):20} {arm.decision:8} {escape(first)}",
                               highlight=False, soft_wrap=True)
        root = result.run_dir
        self.console.print(f"report: {escape(str(root / 'report.html'))}\nsummary: {escape(str(root / 'summary.json'))}"
                           f"  (exit code {summary.exit_code})", highlight=False)
