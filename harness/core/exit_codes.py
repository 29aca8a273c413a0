"""Every exit status the harness's commands end with, in one enum, and what each means (README, "Verdicts and exit
codes").

A rollout that ran to a verdict exits with the verdict's code (:data:`VERDICT_EXIT_CODES`, the one mapping); 2 is
bad input or usage, 4 a run that failed, and 130 Ctrl-C that stopped a command outside a rollout. An error never
exits 1: CI reads 1 as a no-go.

An interrupted rollout (Ctrl-C or SIGTERM while ``harness run`` runs its arms, checks or reports) exits
:data:`ROLLOUT_INTERRUPTED`, which is :attr:`ExitCode.FAILED`: to CI the run did not finish, and
``harness run --resume RUN_DIR`` completes it. :attr:`ExitCode.INTERRUPTED` (130, the shell's code for SIGINT) is
left for Ctrl-C that reaches the command line's error boundary (``harness.core.boundary``) before or outside a
rollout.

:func:`help_lines` renders :data:`MEANINGS` for ``--help``, so the help cannot drift from the codes.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from types import MappingProxyType
from typing import Final


class ExitCode(IntEnum):
    """A command's exit status. ``OK`` is ``GO``'s other name, for a command that ends in no verdict (a report
    rebuilt, a trace analysed, a probe passed); iterating the enum yields each code once, as ``GO``."""

    GO = 0
    OK = 0
    NO_GO = 1
    BAD_INPUT = 2
    HOLD = 3
    FAILED = 4
    SLO_UNMET = 5
    INTERRUPTED = 130


ROLLOUT_INTERRUPTED: Final = ExitCode.FAILED
"""What an interrupted rollout exits with: a run that did not finish (resumable), not the shell's 130."""

VERDICT_EXIT_CODES: Final[Mapping[str, ExitCode]] = MappingProxyType({
    "go": ExitCode.GO, "no-go": ExitCode.NO_GO, "hold": ExitCode.HOLD, "slo-unmet": ExitCode.SLO_UNMET,
    "failed": ExitCode.FAILED,
})
"""A summary's verdict -> the run's exit status (the keys are ``harness.schema.summary.Verdict``'s values)."""

COMPLETED_ROLLOUT: Final = frozenset({ExitCode.GO, ExitCode.NO_GO, ExitCode.HOLD, ExitCode.SLO_UNMET})
"""The codes of a rollout that ran to a verdict (the arms were measured and judged): all but a failed run's."""

MEANINGS: Final[Mapping[ExitCode, tuple[str, str]]] = MappingProxyType({
    ExitCode.GO: ("go", "a tier arm passed every deciding rule: ship the recommended arm"),
    ExitCode.NO_GO: ("no-go", "the first tier that is not go shows harm: keep the recommended (previous) arm"),
    ExitCode.BAD_INPUT: ("bad input", "the scenario, a pre-flight check or the engine's own validation rejected "
                         "it, or a bad option: fix what the message names"),
    ExitCode.HOLD: ("hold", "the evidence does not decide (an unresolved rule, no improvement, no tier hits, an "
                    "arm that could not be judged)"),
    ExitCode.FAILED: ("failed", "the run itself failed (the baseline, a harness error) or was interrupted: "
                      "harness run --resume RUN_DIR"),
    ExitCode.SLO_UNMET: ("slo-unmet", "no arm meets the SLO, the baseline included: revisit the SLO or the load"),
    ExitCode.INTERRUPTED: ("interrupted", "Ctrl-C before a rollout started (a rollout interrupted while it runs "
                           "exits 4)"),
})
"""Each code's short name and what it means, as ``--help`` shows them."""


def verdict_exit_code(verdict: str) -> ExitCode:
    """The exit status of a run that ended in ``verdict`` (KeyError for a name that is no verdict)."""
    return VERDICT_EXIT_CODES[verdict]


def help_lines() -> list[str]:
    """``CODE  NAME: meaning`` for every code, in the enum's order, under an ``Exit codes:`` heading."""
    return ["Exit codes:"] + [f"{code.value}  {MEANINGS[code][0]}: {MEANINGS[code][1]}" for code in ExitCode]


def help_text() -> str:
    """:func:`help_lines` as one block (one line per code) for a command's help epilog."""
    return "\n".join(help_lines())
