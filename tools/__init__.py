"""The repository's benchmarks and tooling, outside the product: never installed (the wheel holds ``harness`` only).

Run from the repository root: ``make perf`` (``python -m tools.perf``), ``make decision-bench``
(``python -m tools.decision_bench.calibrate``), ``make coverage-bench`` (``python -m tools.bench.coverage``), the
per-stage benchmarks ``python -m tools.bench.<stage>``, and the simulator's differential replay against vLLM's
offload managers (:mod:`tools.sim_oracle`, used by the tests). ``tools`` may import ``harness`` and
``tests.support`` (the sample summaries, the simulator as a process); ``harness`` never imports ``tools`` or
``tests`` (``tests/unit/test_layers.py``; ``docs/layout.md``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def child_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the repository root first on ``PYTHONPATH``: a child
    ``python -m tools...`` finds ``tools`` and ``tests.support`` whatever its working directory."""
    env = dict(os.environ if base is None else base)
    rest = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + rest if rest else "")
    return env
