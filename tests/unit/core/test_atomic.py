"""The one atomic writer: the old file or the whole new one, durably; nothing left beside on failure; the target
named in the error; a planted link at a temporary name is never followed; the mode asked for."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from harness.core import atomic
from harness.core.atomic import atomic_path, write_json_atomic, write_text_atomic


def test_a_write_replaces_the_whole_file_and_syncs_file_and_folder(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    target = write_text_atomic(tmp_path / "a.txt", "old\n")
    assert write_text_atomic(target, "new\n") == target and target.read_text() == "new\n"
    assert len(synced) == 4  # each write: the temporary file, then the folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_a_failure_keeps_the_old_file_names_the_target_and_leaves_nothing(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    target = write_json_atomic(tmp_path / "m.json", {"a": 1})
    monkeypatch.setattr(atomic, "_fsync_file", lambda _p: (_ for _ in ()).throw(OSError(errno.ENOSPC, "full")))
    with pytest.raises(OSError) as info:
        write_json_atomic(target, {"a": 2})
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(target)
    assert target.read_text() == '{\n  "a": 1\n}\n' and [p.name for p in tmp_path.iterdir()] == ["m.json"]


def test_an_error_inside_the_block_removes_the_temporary(tmp_path: Path) -> None:
    with pytest.raises(ValueError), atomic_path(tmp_path / "part.parquet") as tmp:
        tmp.write_bytes(b"half")
        raise ValueError("the writer failed")
    assert not list(tmp_path.iterdir())


def test_text_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        write_text_atomic(tmp_path / "x.txt", 123)  # type: ignore[arg-type]
    assert not list(tmp_path.iterdir())


def test_a_private_mode_and_a_planted_link_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    folder = tmp_path / "ledger"
    folder.mkdir()
    for i in range(50):  # links at names a predictable temporary file might take
        (folder / f".sessions.json.{i}.tmp").symlink_to(outside)
    target = write_text_atomic(folder / "sessions.json", "{}\n", mode=0o600)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600 and outside.read_text() == "keep"


def test_json_creates_its_folder(tmp_path: Path) -> None:
    target = write_json_atomic(tmp_path / "deep" / "er" / "x.json", {"b": [1, 2], "a": None})
    assert target.read_text().startswith('{\n  "a": null')
