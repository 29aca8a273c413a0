"""How an arm's work stops short: the run was cancelled (:class:`ArmInterrupted`), or a step could not go on
(:class:`StepProblem`, with whose failure it was). Shared by the arm's runner and its helpers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.rundir.resume import Cause


class ArmInterrupted(Exception):
    """The run was cancelled (Ctrl-C / SIGTERM) during this arm."""


@dataclass(frozen=True)
class StepProblem:
    """Why a step could not go on, and whose failure it was."""

    message: str
    cause: Cause
