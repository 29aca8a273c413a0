"""``make perf``'s client path in tests: stop the warm load runners after each module, and undo what a perf run does
to the test process (its CPU affinity: the perf code pins itself to the server core; the load loggers' level)."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest

from harness.load.runners import shutdown_runners


@pytest.fixture(autouse=True, scope="module")
def _stop_load_runners() -> Iterator[None]:
    yield
    shutdown_runners()


@pytest.fixture(autouse=True)
def _restore_process_state() -> Iterator[None]:
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    load_logger = logging.getLogger("harness.load")
    level = load_logger.level
    yield
    load_logger.setLevel(level)
    if affinity is not None:
        os.sched_setaffinity(0, affinity)
