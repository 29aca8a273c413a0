"""Stop the warm load runners after each test module (no process outlives the tests that started it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.load.runners import shutdown_runners


@pytest.fixture(autouse=True, scope="module")
def _stop_load_runners() -> Iterator[None]:
    yield
    shutdown_runners()
