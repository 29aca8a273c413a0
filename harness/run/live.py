"""Progress output during a run: one line per event, and the outcome at the end.

Every line passes the one redaction path (:mod:`harness.secrets.redact`: the environment's secrets and any
secret-looking ``--flag value``; the run's own redactor has already masked the scenario's secrets in lines that come
through the run context) and :func:`harness.core.term.safe_text`, so a server's text, a model id or a scenario value
that carries a terminal escape sequence is printed with the escapes visible (``\\x1b``), never raw.
"""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.markup import escape as _markup_escape

from harness.core.term import safe_text
from harness.report.headline import headline
from harness.secrets.redact import Redactor

_VERDICT_STYLE = {"go": "bold green", "no-go": "bold red", "hold": "bold yellow", "failed": "bold red"}


class LiveOutput:
    """Prints timestamped progress lines (arm, step, elapsed, running figures) to the console."""

    def __init__(self, console: Console, *, quiet: bool = False, redactor: Redactor | None = None) -> None:
        self.console = console
        self.quiet = quiet
        self.started = time.monotonic()
        self._redact = redactor or Redactor.from_env()

    def shown(self, text: object, *, multiline: bool = False) -> str:
        """Untrusted text as printed: redacted, control characters made visible, rich markup escaped."""
        return _markup_escape(safe_text(self._redact(str(text)), multiline=multiline))

    def say(self, message: str) -> None:
        """One progress line, prefixed with the elapsed time."""
        if self.quiet:
            return
        elapsed = time.monotonic() - self.started
        self.console.print(f"[dim]{elapsed:7.1f}s[/] {self.shown(message)}", highlight=False, soft_wrap=True)

    def finish(self, result: Any) -> None:
        """The headline (:mod:`harness.report.headline`: the verdict, what the tier bought, what stopped a go and
        what to do next), each arm's first reason (the rule that decided it) and break-even load, where the report
        is."""
        summary = result.summary
        if summary is None:
            self.console.print(self.shown(result.message, multiline=True), highlight=False)
            if result.run_dir is not None:
                self.console.print(f"run directory: {self.shown(result.run_dir)}")
            return
        style = _VERDICT_STYLE.get(summary.verdict, "bold")
        sim = ("[bold magenta]" + ("PREDICTED · " if summary.prediction is not None else "") + "SIMULATED"
               + (" (virtual clock)" if summary.clock == "virtual" else "") + " ·[/] " if summary.simulated else "")
        head = headline(summary)
        self.console.print(f"\n{sim}[{style}]{self.shown(head.lead)}[/] {self.shown(head.body)}", highlight=False,
                           soft_wrap=True)
        for arm in summary.arms:
            first = arm.reasons[0] if arm.reasons else ""
            self.console.print(f"  {self.shown(arm.name):20} {self.shown(arm.decision):8} {self.shown(first)}",
                               highlight=False, soft_wrap=True)
            if arm.break_even is not None and arm.break_even.text:
                self.console.print(f"  {'':20} {'':8} break-even: {self.shown(arm.break_even.text)}",
                                   highlight=False, soft_wrap=True)
        root = result.run_dir
        self.console.print(f"report: {self.shown(root / 'report.html')}\nsummary: {self.shown(root / 'summary.json')}"
                           f"  (exit code {summary.exit_code})", highlight=False)
