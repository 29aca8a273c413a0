"""The ``make perf`` table: rows of figures, their goals, pass/miss, and the markdown that prints them.

A :class:`Goal` is a comparison with a limit (``Goal("<", 30, "s")``); a :class:`Row` holds one measured
figure (or why it could not be measured) and, when it has a goal, whether the figure met it. A figure that
could not be measured never passes a goal.

:func:`exit_status` turns a table into ``python -m tools.perf``'s exit status and the lines that explain it, on
the harness's conventions (README, "Verdicts and exit codes"): 0 every figure measured and every goal met;
1 every figure measured, a goal missed (a no-go on speed); 3 a figure could not be measured, so the table cannot
be judged (a hold: fix what its reason names; this wins over 1); 2 bad arguments; 4 an unexpected error.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

Op = Literal["<", "<=", ">", ">="]
EXIT_OK, EXIT_MISSED, EXIT_BAD_INPUT, EXIT_UNMEASURED, EXIT_FAILED = 0, 1, 2, 3, 4
_OPS: dict[str, Callable[[float, float], bool]] = {"<": operator.lt, "<=": operator.le, ">": operator.gt,
                                                   ">=": operator.ge}


@dataclass(frozen=True)
class Goal:
    """``value OP limit`` (e.g. ``< 30 s``)."""

    op: Op
    limit: float
    unit: str = ""

    def met(self, value: float | None) -> bool:
        """True when ``value`` is a finite number that satisfies the goal."""
        if value is None or not math.isfinite(value):
            return False
        return _OPS[self.op](value, self.limit)

    @property
    def text(self) -> str:
        """The goal as printed, e.g. ``< 30 s``."""
        return f"{self.op} {fmt_number(self.limit)}{' ' + self.unit if self.unit else ''}"


@dataclass(frozen=True)
class Row:
    """One figure of the table."""

    section: str
    figure: str
    tool: str
    value: float | None
    unit: str = ""
    goal: Goal | None = None
    note: str = ""
    error: str | None = None  # why the figure is missing

    @property
    def measured(self) -> bool:
        """True when the row holds a finite figure."""
        return self.error is None and self.value is not None and math.isfinite(self.value)

    @property
    def why_missing(self) -> str:
        """Why the figure is missing (for a row that is not :attr:`measured`)."""
        if self.error is not None:
            return self.error
        return "no figure" if self.value is None else f"not a finite figure ({self.value})"

    @property
    def name(self) -> str:
        """The row as a message names it: ``section / figure (tool)``."""
        return f"{self.section} / {self.figure} ({self.tool})"

    @property
    def passed(self) -> bool | None:
        """None without a goal; else whether the figure met it."""
        if self.goal is None:
            return None
        return self.error is None and self.goal.met(self.value)

    @property
    def actual(self) -> str:
        """The figure as printed (or ``n/a`` with the reason in the note)."""
        if self.error is not None or self.value is None:
            return "n/a"
        return f"{fmt_number(self.value)}{' ' + self.unit if self.unit else ''}"


@dataclass
class PerfTable:
    """All rows of one ``make perf`` run, with the header facts (machine, pinning, notes)."""

    title: str
    facts: list[tuple[str, str]] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, row: Row) -> Row:
        """Append a row and return it."""
        self.rows.append(row)
        return row

    @property
    def goals(self) -> list[Row]:
        """Rows that have a goal."""
        return [r for r in self.rows if r.goal is not None]

    @property
    def missed(self) -> list[Row]:
        """Rows whose goal was missed (or whose figure is missing)."""
        return [r for r in self.goals if not r.passed]

    @property
    def unmeasured(self) -> list[Row]:
        """Rows (with a goal or informative) whose figure could not be measured."""
        return [r for r in self.rows if not r.measured]

    @property
    def missed_measured(self) -> list[Row]:
        """Rows whose figure was measured and misses its goal."""
        return [r for r in self.missed if r.measured]


def fmt_number(value: float) -> str:
    """A compact human figure: thousands separators for large values, 3 significant digits for small ones."""
    if not math.isfinite(value):
        return str(value)
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1 or magnitude == 0:
        return f"{value:.2f}"
    if magnitude >= 0.1:
        return f"{value:.3f}"  # ratios: three decimals
    return f"{value:.3g}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _pass_cell(row: Row) -> str:
    if row.passed is None:
        return ""
    return "PASS" if row.passed else "MISS"


def markdown(table: PerfTable) -> str:
    """The whole table as markdown (readable as plain text too)."""
    lines = [f"# {table.title}", ""]
    lines += [f"- {name}: {value}" for name, value in table.facts]
    header = ("section", "figure", "tool", "actual", "goal", "pass", "note")
    body: list[Sequence[str]] = [
        (r.section, r.figure, r.tool, r.actual, r.goal.text if r.goal else "", _pass_cell(r),
         r.error if r.error is not None else r.note)
        for r in table.rows]
    widths = [max(len(_cell(cells[i])) for cells in (header, *body)) for i in range(len(header))]
    widths[-1] = max(len(header[-1]), 4)  # notes are long: do not pad every row to the longest
    lines += ["", _row(header, widths), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += [_row(cells, widths) for cells in body]
    goals, missed, measured_misses = table.goals, table.missed, table.missed_measured
    unjudged = [r for r in missed if not r.measured]
    lines += ["", f"Goals: {len(goals) - len(missed)} of {len(goals)} met"
              + (f"; missed: {', '.join(f'{r.figure} ({r.tool})' for r in measured_misses)}" if measured_misses else "")
              + (f"; not measured: {', '.join(f'{r.figure} ({r.tool})' for r in unjudged)}" if unjudged else "")
              + ("" if missed else ".")]
    if table.notes:
        lines += ["", "Notes:"] + [f"- {n}" for n in table.notes]
    return "\n".join(lines) + "\n"


def _row(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "| " + " | ".join(_cell(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"


def exit_status(table: PerfTable) -> tuple[int, list[str]]:
    """The exit status for ``table`` and the lines that say why (empty for 0); see the module docstring."""
    lines: list[str] = []
    unmeasured, misses = table.unmeasured, table.missed_measured
    if unmeasured:
        goal_rows = sum(1 for r in unmeasured if r.goal is not None)
        lines.append(f"perf: {len(unmeasured)} figure(s) could not be measured ({goal_rows} with a goal): the table "
                     f"cannot be judged (exit {EXIT_UNMEASURED}):")
        lines += [f"  - not measured: {r.name}{' [goal ' + r.goal.text + ']' if r.goal else ''}: "
                  f"{_cell(r.why_missing)}" for r in unmeasured]
    if misses:
        lines.append(f"perf: {len(misses)} goal(s) measured and missed"
                     + ("" if unmeasured else f" (exit {EXIT_MISSED})") + ":")
        lines += [f"  - missed: {r.name}: {r.actual}, goal {r.goal.text if r.goal else ''}" for r in misses]
    if unmeasured:
        return EXIT_UNMEASURED, lines
    return (EXIT_MISSED if misses else EXIT_OK), lines
