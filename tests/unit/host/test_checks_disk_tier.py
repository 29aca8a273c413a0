"""Disk-tier ownership: claim marks a directory, clear_contents deletes only inside marked directories, keeps the
marker and never follows links out."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.host import disk_tier
from harness.host.disk_tier import DiskTierError, claim, clear_contents, ownership, validate_root_dir
from harness.host.labels import DISK_TIER_MARKER


def test_ownership_states(tmp_path: Path) -> None:
    assert ownership(tmp_path / "absent") == "absent"
    (tmp_path / "empty").mkdir()
    assert ownership(tmp_path / "empty") == "empty"
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert ownership(tmp_path / "full") == "foreign"
    (tmp_path / "file").write_text("x")
    assert ownership(tmp_path / "file") == "foreign"
    (tmp_path / "link").symlink_to(tmp_path / "empty")
    assert ownership(tmp_path / "link") == "foreign"
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert ownership(tmp_path / "dangling") == "foreign"


def test_claim_creates_and_marks(tmp_path: Path) -> None:
    root = tmp_path / "a" / "kv"
    claim(root, "run-1")
    marker = json.loads((root / DISK_TIER_MARKER).read_text())
    assert marker["owner"] == "kvoffload-harness" and marker["run_id"] == "run-1"
    assert marker["path"] == os.path.realpath(root) and len(marker["nonce"]) == 32
    assert ownership(root) == "ours"
    claim(root, "run-2")  # already ours: the marker is kept as it was (reuse across runs)
    assert json.loads((root / DISK_TIER_MARKER).read_text()) == marker


def test_claim_marks_an_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "kv").mkdir()
    claim(tmp_path / "kv", "r")
    assert ownership(tmp_path / "kv") == "ours"


def test_claim_refuses_a_foreign_directory(tmp_path: Path) -> None:
    (tmp_path / "kv").mkdir()
    (tmp_path / "kv" / "data.bin").write_text("user data")
    with pytest.raises(DiskTierError, match="holds files the harness did not create"):
        claim(tmp_path / "kv", "r")
    assert not (tmp_path / "kv" / DISK_TIER_MARKER).exists()


def test_claim_refuses_forbidden_paths() -> None:
    with pytest.raises(DiskTierError, match="system directory"):
        claim(Path("/"), "r")


def test_clear_contents_refuses_without_the_marker(tmp_path: Path) -> None:
    (tmp_path / "kv").mkdir()
    (tmp_path / "kv" / "data.bin").write_text("user data")
    with pytest.raises(DiskTierError, match="not marked as created by the harness"):
        clear_contents(tmp_path / "kv")
    assert (tmp_path / "kv" / "data.bin").read_text() == "user data"
    with pytest.raises(DiskTierError):
        clear_contents(tmp_path / "absent")
    with pytest.raises(DiskTierError, match="absolute"):
        clear_contents(Path("relative"))


def test_clear_contents_keeps_the_marker_and_counts(tmp_path: Path) -> None:
    root = tmp_path / "kv"
    claim(root, "r")
    end = disk_tier.begin_session(root, "vllm", "r")  # what an engine the harness launched writes
    (root / "a.kvsim").write_text("x")
    (root / "ns" / "deep").mkdir(parents=True)
    (root / "ns" / "deep" / "b.kvsim").write_text("x")
    (root / "ns" / DISK_TIER_MARKER).write_text("a nested file of the same name is not the marker")
    end()
    assert clear_contents(root) == 5  # a.kvsim, ns, ns/deep, ns/deep/b.kvsim, ns/<marker name>
    assert sorted(os.listdir(root)) == [DISK_TIER_MARKER]
    assert clear_contents(root) == 0


def test_clear_contents_never_follows_links(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    root = tmp_path / "kv"
    claim(root, "r")
    end = disk_tier.begin_session(root, "vllm", "r")
    (root / "dirlink").symlink_to(outside)
    (root / "sub").mkdir()
    (root / "sub" / "filelink").symlink_to(outside / "keep.txt")
    (root / "sub" / "dirlink").symlink_to(outside)
    end()
    assert clear_contents(root) == 4
    assert (outside / "keep.txt").read_text() == "keep"
    assert sorted(os.listdir(root)) == [DISK_TIER_MARKER]


def test_clear_contents_tolerates_entries_vanishing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "kv"
    claim(root, "r")
    end = disk_tier.begin_session(root, "vllm", "r")
    (root / "gone").write_text("x")
    (root / "stays-gone").write_text("x")
    end()
    real_unlink = os.unlink

    def racing_unlink(path: str) -> None:
        if path.endswith("gone") and not path.endswith("stays-gone"):
            real_unlink(path)  # the engine evicted it first
            raise FileNotFoundError(path)
        real_unlink(path)

    monkeypatch.setattr(disk_tier.os, "unlink", racing_unlink)
    assert clear_contents(root) == 1
    assert sorted(os.listdir(root)) == [DISK_TIER_MARKER]


def test_validate_root_dir_normalises() -> None:
    assert validate_root_dir("/mnt/nvme//kv/") == Path("/mnt/nvme/kv")
    assert validate_root_dir("/tmp/kv") == Path("/tmp/kv")
