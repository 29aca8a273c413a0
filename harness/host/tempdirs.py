"""The harness's per-step temporary directories (``harness-step-*``), labelled with their owner so that ``harness
cleanup`` can find the ones a killed run left.

A step's directory holds the step's spec (server URL, model, record paths) and outcome for the load runner. It is
created ``0700`` by :func:`step_dir` and removed when the step ends; a harness killed with SIGKILL cannot remove it,
so each carries ``owner.json``: the harness process (pid and start time, :mod:`.owner`) and the run id. A directory
whose owner process is gone is stale; one whose owner still runs is live and never touched; one without an owner
record this user wrote (an older harness, someone else) is unknown and never touched either.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.host.owner import current, parse_pid_start, process_alive
from harness.host.state import owned_file

STEP_PREFIX = "harness-step-"
OWNER_FILE = "owner.json"
MAX_DIRS_LISTED = 1000
MAX_OWNER_BYTES = 2000


@dataclass(frozen=True)
class StepDir:
    """One step directory and what its owner record says (``pid`` 0: no record this user wrote)."""

    path: Path
    run_id: str
    pid: int
    start: float
    since_boot: float | None = None
    boot: str = ""

    @property
    def state(self) -> str:
        """``live`` (its harness process runs), ``stale`` (that process is gone) or ``unknown`` (no owner record)."""
        if not self.pid:
            return "unknown"
        return "live" if process_alive(self.pid, self.start, self.since_boot, self.boot) else "stale"


@contextlib.contextmanager
def step_dir(run_id: str) -> Iterator[Path]:
    """A new ``0700`` temporary directory for one step, labelled with this process and ``run_id``; removed on exit."""
    path = Path(tempfile.mkdtemp(prefix=STEP_PREFIX))
    try:
        os.chmod(path, 0o700)
        record = json.dumps({"owner": current().text(), "run_id": run_id[:200]})
        fd = os.open(path / OWNER_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(record)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def read_owner(path: Path) -> StepDir:
    """The directory with its owner record (pid 0 when it has none this user wrote)."""
    record = path / OWNER_FILE
    if owned_file(record):
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(record.read_text(encoding="utf-8")[:MAX_OWNER_BYTES])
            owner = parse_pid_start(str(data.get("owner", ""))) if isinstance(data, dict) else None
            if owner is not None:
                return StepDir(path, str(data.get("run_id", ""))[:200], owner.pid, owner.start, owner.since_boot,
                               owner.boot)
    return StepDir(path, "", 0, 0.0)


def step_dirs(root: Path | None = None) -> list[StepDir]:
    """This user's step directories in the temporary directory (plain directories, links never followed; at most
    :data:`MAX_DIRS_LISTED`), sorted by path."""
    found: list[StepDir] = []
    top = root or Path(tempfile.gettempdir())
    with contextlib.suppress(OSError), os.scandir(top) as entries:
        for entry in entries:
            if len(found) >= MAX_DIRS_LISTED:
                break
            if not entry.name.startswith(STEP_PREFIX):
                continue
            with contextlib.suppress(OSError):
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid():
                    found.append(read_owner(Path(entry.path)))
    return sorted(found, key=lambda d: str(d.path))


def remove_if_stale(path: Path) -> bool:
    """Remove a step directory whose owner process is gone (checked again now); returns whether it was removed."""
    item = read_owner(path)
    if item.state != "stale" or path.is_symlink():
        return False
    shutil.rmtree(path, ignore_errors=True)
    return not path.exists()
