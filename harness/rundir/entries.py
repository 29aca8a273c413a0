"""One model per journal line of a run directory: :class:`StepEntry` (``steps.jsonl``), :class:`ArmEvent`
(``arms.jsonl``) and :class:`DrillEvent` (``drill_events.jsonl``).

Writers build the model and append it through :mod:`harness.rundir.journal`; readers read the lines back into the
same model. A line holds the fields its writer set (:meth:`JournalLine.line`), so a field added later is absent from
older run directories and reads as its default (``attempt`` 1, no ``search``). Keys a model does not name pass
through unchecked (a newer harness's field, an action's own details). Clocks: ``*_ns`` are ``perf_counter_ns``
readings, ``*_wall_ns`` ``time_ns``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.core.limits import MAX_CONCURRENCY, MAX_RATE_RPS, MAX_SEARCH_SESSIONS
from harness.schema.summary import ClientHealth

MAX_NS = 2**63 - 1  # clock readings are signed 64-bit nanoseconds
MAX_STEP_NS = 7 * 86_400 * 10**9  # a step (or drill phase) longer than a week is not one the harness ran


class JournalLine(BaseModel):
    """A journal line: the named fields checked, any other key kept as it is."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)

    def line(self) -> dict[str, Any]:
        """The line to write (or that was read): the fields set and the extra keys; nested models whole."""
        return self.model_dump(include=set(self.model_fields_set))

    def extra(self, key: str) -> Any:
        """A key the model does not name (None when the line has none)."""
        return (self.model_extra or {}).get(key)


class ProbeSearch(BaseModel):
    """The ``search`` object of a capacity probe's entry: its session, place and load."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)
    session: int = Field(default=1, ge=1, le=MAX_SEARCH_SESSIONS)  # a resumed run searches again as a new session
    probe: int | None = Field(default=None, ge=1, le=100_000)
    load: int | float | None = Field(default=None, gt=0, le=MAX_RATE_RPS)  # users or requests/s, as steps.levels
    extended: bool = False


class StepEntry(JournalLine):
    """One line of ``steps.jsonl``: a finished step, the warm-up (step -1), a drill phase (step -2 - drill number,
    with ``drill``, ``drill_phase``, ``drill_run``) or a capacity probe (``search``), with its clock readings and the
    attempt it closes (:mod:`harness.rundir.attempts`)."""

    arm: str
    step: int = Field(ge=-100_000, le=100_000)
    label: str = ""
    concurrency: int | None = Field(default=None, ge=0, le=MAX_CONCURRENCY)
    rate_rps: float | None = Field(default=None, ge=0, le=MAX_RATE_RPS)
    start_ns: int = Field(ge=0, le=MAX_NS)
    end_ns: int = Field(ge=0, le=MAX_NS)
    start_wall_ns: int | None = Field(default=None, ge=0, le=MAX_NS)
    end_wall_ns: int | None = Field(default=None, ge=0, le=MAX_NS)
    warmup: bool = False
    requests: int | None = Field(default=None, ge=0)
    errors: int | None = Field(default=None, ge=0)
    client: ClientHealth | None = None
    partial: bool = False  # cut short by the server or the load generator
    error: str | None = None
    recorded_at: float | None = None  # time.time() when journaled
    planned_duration_s: float | None = Field(default=None, ge=0)
    ended_early: bool = False
    stop_reason: str | None = None
    attempt: int = Field(default=1, ge=1)
    drill: str | None = None
    drill_phase: str | None = None
    drill_run: str | None = None
    drill_number: int | None = None
    search: ProbeSearch | None = None
    sim_behind_s: float | None = Field(default=None, ge=0)  # the simulator's time lost to its own CPU in the step

    @model_validator(mode="after")
    def _span(self) -> StepEntry:
        if self.end_ns < self.start_ns:
            raise ValueError(f"end_ns ({self.end_ns}) is before start_ns ({self.start_ns})")
        if self.end_ns - self.start_ns > MAX_STEP_NS:
            raise ValueError(f"end_ns - start_ns is {(self.end_ns - self.start_ns) / 1e9:.3g} s, longer than any "
                             f"step ({MAX_STEP_NS // 10**9} s at most)")
        return self

    @property
    def duration_s(self) -> float:
        """Seconds between start and end."""
        return (self.end_ns - self.start_ns) / 1e9

    @property
    def measured(self) -> bool:
        """A load step that counts (step >= 0; not warm-up, not a drill)."""
        return self.step >= 0 and not self.warmup and not self.drill

    @property
    def key(self) -> tuple[str, int]:
        """(arm, step)."""
        return self.arm, self.step


def step_entries(items: Iterable[StepEntry | Mapping[str, Any]]) -> list[StepEntry]:
    """Entries from models or plain ``steps.jsonl`` dicts (checked)."""
    return [e if isinstance(e, StepEntry) else StepEntry.model_validate(e) for e in items]


class FailureEntry(JournalLine):
    """Why an arm failed, as ``arms.jsonl`` records it."""

    phase: Literal["start", "readiness", "live-config", "step", "drill", "harness"] = "harness"
    message: str = "unknown"
    log_tail: list[str] = Field(default_factory=list)


class ArmEvent(JournalLine):
    """One line of ``arms.jsonl``: ``starting`` (``command``), ``ready`` (``seconds``, ``identity``), ``attempt``
    (``step``, ``label``, ``attempt``: a step's try starts), ``completed`` / ``failed`` (``steps``, ``failure``,
    ``cause``), ``interrupted`` (``forced``), ``capacity`` and the live-configuration check; each at ``at`` (UTC)."""

    arm: str
    event: str
    at: str | None = None
    command: str | None = None
    seconds: float | None = None
    step: int | None = None
    label: str | None = None
    attempt: int | None = None
    steps: int | None = None
    failure: FailureEntry | None = None
    cause: str | None = None  # of a failure: server | harness (harness.rundir.resume)
    forced: bool | None = None


class DrillEvent(JournalLine):
    """One line of ``drill_events.jsonl``: what drill ``number`` (``kind``) on ``arm`` did in its attempt
    ``drill_run``: ``start``, an ``action`` (with the action's own details as extra keys), ``action_error``, and its
    end, ``done`` / ``error`` / ``skipped`` (with a ``message``)."""

    arm: str
    kind: str
    number: int
    drill_run: str | None = None
    event: str
    at_ns: int = Field(ge=0, le=MAX_NS)
    at_wall_ns: int = Field(ge=0, le=MAX_NS)
    action: str | None = None
    message: str | None = None
    ok: bool | None = None
