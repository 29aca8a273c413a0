"""The power estimate's inputs from the ``harness plan`` options (``--from-run``, ``--calibrate``, ``--sigma``),
each checked with a clear message (:class:`~harness.plan.power.rates.PowerInputError`, exit 2 at the command line)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from harness.config.scenario import Scenario
from harness.plan.power.model import PowerInput
from harness.plan.power.rates import PowerInputError, read_run


def power_input(scenario: Scenario, *, from_run: Path | None = None, calibrate: bool = False,
                calibrate_s: float = 5.0, sigma: float | None = None,
                say: Callable[[str], None] | None = None) -> PowerInput:
    """Read the run, calibrate on the simulator, and take the declared spread, as asked."""
    if sigma is not None and not (math.isfinite(sigma) and 0 < sigma <= 5):
        raise PowerInputError(f"--sigma {sigma:g}: give the lognormal spread as 0 < sigma <= 5 (e.g. 0.5)")
    measured = read_run(from_run) if from_run is not None else None
    calibrated = None
    if calibrate:
        from harness.run.calibrate import calibrate as run_calibration

        calibrated = run_calibration(scenario, calibrate_s, say=say)
    elif calibrate_s != 5.0:
        raise PowerInputError("--calibrate-s only applies with --calibrate")
    return PowerInput(measured=measured, calibrated=calibrated, sigma=sigma)
