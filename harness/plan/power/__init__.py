"""Power before the run (``harness plan``): requests per step and budget window from a declared, measured or
simulated throughput, the percentiles each step resolves at the rules' own error rates, the smallest effect the plan
can detect, and ``power`` warnings for a plan that cannot decide.

- :func:`plan_power` (:mod:`.estimate`) -> :class:`PowerPlan` (:mod:`.model`); :func:`power_checks` (:mod:`.checks`)
- :func:`read_run` (:mod:`.rates`, ``--from-run``); ``--calibrate`` runs the simulator, so it lives with the runs
  (:mod:`harness.run.calibrate`, gathered by :mod:`harness.run.power_input`)
- :func:`print_power` (:mod:`.view`)
"""

from harness.plan.power.checks import power_checks
from harness.plan.power.estimate import plan_power
from harness.plan.power.model import PowerInput, PowerPlan, Throughput
from harness.plan.power.rates import PowerInputError, read_run

__all__ = ["PowerInput", "PowerInputError", "PowerPlan", "Throughput", "plan_power", "power_checks", "read_run"]
