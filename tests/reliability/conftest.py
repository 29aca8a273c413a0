"""Fixtures of the reliability suite: fast scenarios in the test's temp dir, and a check that no process a test
started outlives it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rel_support import assert_no_new_children, child_pids, make_scenario


@pytest.fixture
def scenario(tmp_path: Path) -> Callable[..., Path]:
    """``scenario(name, **kwargs)`` writes a fast scenario (see :func:`make_scenario`) into the test's temp dir."""

    def make(name: str = "rel", **kwargs: Any) -> Path:
        kwargs.setdefault("tier_root", tmp_path / f"{name}-kv")
        return make_scenario(tmp_path / f"{name}.yaml", **kwargs)

    return make


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own harness state directory (pid files, marker ledger), also for the CLIs it starts."""
    path = tmp_path / "state"
    monkeypatch.setenv("HARNESS_STATE_DIR", str(path))
    return path


@pytest.fixture(autouse=True)
def no_leftover_processes() -> Iterator[None]:
    """Every process a test started (servers, load runners) is gone when it ends."""
    before = child_pids()
    yield
    assert_no_new_children(before)
