"""Pre-flight checks run by ``harness plan`` and ``harness run``: each yields ok / warn / error with its numbers.

Checks are plain functions ``(scenario, host, mode) -> list[CheckItem]`` listed in :data:`ALL_CHECKS`; host facts
(available memory, free disk, GPU runtime) come from an injectable :class:`~harness.host.facts.HostFacts`.
"""

from harness.plan.checks.runner import ALL_CHECKS, run_checks

__all__ = ["ALL_CHECKS", "run_checks"]
