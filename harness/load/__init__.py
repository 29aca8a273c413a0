"""Load generation: deterministic request plans, streaming clients, locust-driven steps, durable records.

Public entry points (imported lazily, so ``import harness.load`` never pulls in gevent or locust, which patch
the standard library; those only run in the step subprocess, :mod:`harness.load.locust_runner`):

- :func:`run_step` / :class:`StepRun` / :class:`StepOutcome` (:mod:`.step`): run one step from a synchronous
  thread.
- :func:`build_plan`, :func:`plan_bytes`, :func:`plan_fingerprint`, :class:`StepPlan`, :class:`LoadConfigError`
  (:mod:`.plan`): the deterministic request plan.
- :func:`calibrate_tokenizer`, :class:`TokenCalibration` (:mod:`.tokens`): token lengths for the server's
  tokenizer.
- :func:`load_trace`, :class:`TraceLoadError` (:mod:`.replay`): Mooncake trace replay.
- :func:`build_requests_parquet` (:mod:`.parts`): ``requests.parquet`` from the record parts.
- :func:`probe`, :func:`probe_command` (:mod:`.probe`): ``harness probe URL``.
- :func:`prewarm_runner`, :func:`shutdown_runners` (:mod:`.runners`): the warm locust processes behind
  ``run_step`` (start one early; stop them all).

Module map: ``text`` (synthetic words, block hashes), ``request`` (a planned request), ``synth`` (classes and
reuse structures), ``replay`` (traces), ``plan``, ``tokens``, ``sse`` (stream decoding), ``client`` (HTTP
backends), ``driver`` (timing, records), ``locust_users`` / ``master`` / ``locust_runner`` (the locust
process), ``runners`` (warm locust processes, parent side), ``spec`` (the parent/runner contract), ``parts``
(record parts), ``health`` (client saturation), ``step`` (the parent side), ``probe``, ``bench``
(``python -m harness.load.bench``). See ``docs/load.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.load.parts import build_requests_parquet
    from harness.load.plan import LoadConfigError, StepPlan, build_plan, plan_bytes, plan_fingerprint
    from harness.load.probe import ProbeReport, probe, probe_command
    from harness.load.replay import TraceLoadError, load_trace
    from harness.load.runners import prewarm_runner, shutdown_runners
    from harness.load.step import StepOutcome, StepRun, run_step
    from harness.load.tokens import TokenCalibration, calibrate_tokenizer

_EXPORTS = {
    "run_step": "step", "StepRun": "step", "StepOutcome": "step",
    "build_plan": "plan", "plan_bytes": "plan", "plan_fingerprint": "plan", "StepPlan": "plan",
    "LoadConfigError": "plan",
    "calibrate_tokenizer": "tokens", "TokenCalibration": "tokens",
    "load_trace": "replay", "TraceLoadError": "replay",
    "build_requests_parquet": "parts",
    "probe": "probe", "probe_command": "probe", "ProbeReport": "probe",
    "prewarm_runner": "runners", "shutdown_runners": "runners",
}

__all__ = [
    "LoadConfigError", "ProbeReport", "StepOutcome", "StepPlan", "StepRun", "TokenCalibration", "TraceLoadError",
    "build_plan", "build_requests_parquet", "calibrate_tokenizer", "load_trace", "plan_bytes", "plan_fingerprint",
    "prewarm_runner", "probe", "probe_command", "run_step", "shutdown_runners",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'harness.load' has no attribute {name!r}")
    return getattr(importlib.import_module(f"harness.load.{module}"), name)
