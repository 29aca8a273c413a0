"""A few repetitions of the two-process stress (``stress_two_processes.py``; run it with ``--repeats 50`` by hand):
every short two-process step ends within its deadline with every record counted and both ranks reporting."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stress_two_processes import main


@pytest.mark.slow
def test_two_process_steps_never_stall() -> None:
    assert main(["--repeats", "5", "--requests", "48", "--deadline", "40", "--max-minutes", "5"]) == 0
