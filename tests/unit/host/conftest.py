"""Every test gets its own harness state directory (pid files, the disk-tier marker ledger), never the user's."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def private_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``HARNESS_STATE_DIR`` pointed at a fresh temporary directory."""
    path = tmp_path_factory.mktemp("harness-state")
    monkeypatch.setenv("HARNESS_STATE_DIR", str(path))
    return path
