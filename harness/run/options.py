"""What ``harness run`` is asked (:class:`RunOptions`) and what it answers (:class:`RunResult`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.host.facts import HostFacts
from harness.plan.validate.runner import ValidateOptions
from harness.schema.prediction import Prediction
from harness.schema.summary import CheckItem, Summary


@dataclass
class RunOptions:
    """Options of ``harness run``."""

    out_dir: Path = Path("results")
    only: list[str] | None = None
    resume: Path | None = None
    allow_unpinned: bool = False
    overrides: tuple[str, ...] = ()
    host: HostFacts | None = None
    write_reports: bool = True
    validate: ValidateOptions | None = None  # the engine's own check of every arm first; None skips it
    require_validation: bool = False  # an arm the engine's code could not check stops the run (exit 2)
    virtual: bool = False  # engine.sim_clock: virtual (the simulated engine only): `harness run --virtual`
    prediction: Prediction | None = None  # `harness predict`: its record, in the new run directory before any arm


@dataclass
class RunResult:
    """What the run produced."""

    run_dir: Path | None
    exit_code: int
    summary: Summary | None = None
    checks: list[CheckItem] | None = None
    message: str = ""


class BadRunInput(Exception):
    """Bad input discovered before anything was launched (exit 2)."""
