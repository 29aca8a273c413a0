"""Load generation: streaming clients, locust-driven steps, client health and the probe.

Public entry points (imported lazily, so ``import harness.load`` never pulls in gevent or locust, which patch
the standard library; those only run in the step subprocess, :mod:`harness.load.locust_runner`):

- :func:`run_step` / :class:`StepRun` / :class:`StepOutcome` (:mod:`.step`): run one step from a synchronous
  thread.
- :func:`probe`, :func:`probe_command` (:mod:`.probe`): ``harness probe URL``.
- :func:`prewarm_runner`, :func:`shutdown_runners` (:mod:`.runners`): the warm locust processes behind
  ``run_step`` (start one early; stop them all).

What a step sends comes from :mod:`harness.workload` (request plans, token calibration, trace replay); the records
it writes go through :mod:`harness.rundir.parts`.

Module map: ``sse`` (stream decoding), ``client`` (HTTP backends), ``driver`` (timing, records), ``locust_users`` /
``master`` / ``locust_runner`` (the locust process), ``runners`` (warm locust processes, parent side), ``spec`` (the
parent/runner contract), ``health`` (client saturation), ``step`` (the parent side), ``probe``, ``worker*``
(distributed load workers). The load generator's benchmark is ``python -m tools.bench.load`` (outside the package).
See ``docs/load.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.load.probe import ProbeReport, probe, probe_command
    from harness.load.runners import prewarm_runner, shutdown_runners
    from harness.load.step import StepOutcome, StepRun, run_step

_EXPORTS = {
    "run_step": "step", "StepRun": "step", "StepOutcome": "step",
    "probe": "probe", "probe_command": "probe", "ProbeReport": "probe",
    "prewarm_runner": "runners", "shutdown_runners": "runners",
}

__all__ = [
    "ProbeReport", "StepOutcome", "StepRun", "prewarm_runner", "probe", "probe_command", "run_step", "shutdown_runners",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'harness.load' has no attribute {name!r}")
    return getattr(importlib.import_module(f"harness.load.{module}"), name)
