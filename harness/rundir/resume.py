"""What a run directory's journals say is left to do: which arms ended for good, and each step's next attempt.

An arm's outcome is its last terminal event in ``arms.jsonl`` (``completed``, ``failed``, ``interrupted``). A
``failed`` event carries a ``cause``:

* ``server`` — the server could not start, did not become ready, died, or the engine refused the arm's config: the
  arm is judged ``failed`` (could not be judged) and ``--resume`` leaves it as it is;
* ``harness`` — the harness's own failure (the results disk filled up, the load generator died or could not write
  its records, an unexpected error): it is never blamed on the tier, and ``--resume`` redoes the arm on a fresh
  server.

A ``failed`` event written before causes existed reads as ``server``, unless its message is one the load generator's
own failures wrote then. Each start of a step is journaled as an ``attempt`` event (arm, step, attempt), which numbers
the next try (see :mod:`harness.rundir.attempts`).

Events are the journal's :class:`~harness.rundir.entries.ArmEvent` models
(:func:`harness.rundir.journal.read_arm_events`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from harness.rundir.entries import ArmEvent

Cause = Literal["server", "harness"]
TERMINAL = ("completed", "failed", "interrupted")
ATTEMPT_EVENT = "attempt"
# What the load generator's own failures said before ``cause`` was journaled (old run directories).
_HARNESS_MESSAGES = ("load runner failed:", "the load generator died without an outcome",
                     "load worker(s) stopped responding")


def event_attempt(event: ArmEvent) -> int:
    """The attempt an ``attempt`` event names; 1 where it names none (written before attempts existed)."""
    return event.attempt if event.attempt is not None and event.attempt >= 1 else 1


def failure_cause(event: ArmEvent) -> Cause:
    """The cause of a ``failed`` event (``server`` for old events, unless the load generator's own failure)."""
    if event.cause in ("harness", "server"):
        return "harness" if event.cause == "harness" else "server"
    message = event.failure.message if event.failure is not None else ""
    return "harness" if any(m in message for m in _HARNESS_MESSAGES) else "server"


def arm_outcomes(events: Iterable[ArmEvent]) -> dict[str, ArmEvent]:
    """The last terminal event of every arm that has one."""
    return {e.arm: e for e in events if e.event in TERMINAL}


def finished_arms(events: Iterable[ArmEvent]) -> set[str]:
    """Arms ``--resume`` leaves as they are: completed, or failed because of the server."""
    return {arm for arm, e in arm_outcomes(events).items()
            if e.event == "completed" or (e.event == "failed" and failure_cause(e) == "server")}


def next_attempt(events: Iterable[ArmEvent], arm: str, step: int, *, earlier_records: bool) -> int:
    """The number of the next try of ``arm``'s ``step``: one more than the journaled attempts; 2 where records of
    the step exist from before attempts were journaled (``earlier_records``)."""
    prior = max((event_attempt(e) for e in events if e.event == ATTEMPT_EVENT and e.arm == arm and e.step == step),
                default=0)
    if prior == 0 and earlier_records:
        prior = 1
    return prior + 1
