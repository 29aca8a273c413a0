"""Where the harness's load runner spends its CPU: a py-spy profile of one capacity run, summarised.

``py-spy record --pid RUNNER --subprocesses --format raw`` samples the warm locust runner (the PID the runner
pool reports; non-blocking), and the local workers of a multi-process step with it, while it runs one step; the
collapsed stacks are kept next to the table, and :func:`summarise` attributes every sample to a part of the load
path by its innermost recognised frame (JSON decoding, SSE parsing, HTTP reading, gevent sockets and hub, request
planning, record writing, driver, locust) and lists the functions with the most self time. py-spy is optional:
without it the summary says so.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# (part, substrings of a frame's file) checked from the innermost frame outwards; the first match wins.
PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("JSON decoding (json.loads per SSE event)", ("json/decoder.py", "json/__init__.py")),
    ("SSE parsing (harness/load/sse.py)", ("harness/load/sse.py",)),
    ("HTTP reading (geventhttpclient parser, harness/load/lines.py: lines, arrival times)",
     ("geventhttpclient/", "harness/load/lines.py")),
    ("record writing (harness/rundir/parts.py, pyarrow)", ("harness/rundir/parts.py", "pyarrow/")),
    ("request planning (synth/text/plan/request)", ("harness/workload/synthesis.py", "harness/workload/text.py",
                                                    "harness/workload/plan.py", "harness/workload/requests.py")),
    ("stream client (harness/load/client.py)", ("harness/load/client.py",)),
    ("driver and records (harness/load/driver.py)", ("harness/load/driver.py",)),
    ("gevent sockets, hub, threadpool", ("gevent/",)),
    ("locust", ("locust/",)),
)
OTHER = "other"


@dataclass
class ProfileSummary:
    """Samples per part and the functions with the most self time."""

    samples: int
    parts: list[tuple[str, int]] = field(default_factory=list)
    top_self: list[tuple[str, int]] = field(default_factory=list)
    raw_path: Path | None = None

    def lines(self, top: int = 10) -> list[str]:
        """Human lines: the share of each part, then the top self-time functions."""
        if not self.samples:
            return ["py-spy took no samples"]
        out = [f"py-spy profile of the harness load runner ({self.samples} samples"
               + (f"; stacks: {self.raw_path}" if self.raw_path else "") + "):"]
        out += [f"  {100 * n / self.samples:5.1f}%  {part}" for part, n in self.parts]
        out += ["  top self time:"]
        out += [f"  {100 * n / self.samples:5.1f}%  {name}" for name, n in self.top_self[:top]]
        return out


def _part(frames: list[str]) -> str:
    for frame in reversed(frames):
        for part, needles in PARTS:
            if any(n in frame for n in needles):
                return part
    return OTHER


def summarise(raw: str, top: int = 15) -> ProfileSummary:
    """Summarise py-spy's raw (collapsed) output: ``frame;frame;... COUNT`` per line."""
    parts: Counter[str] = Counter()
    self_time: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, count_text = line.strip().rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [f for f in stack.split(";") if f and not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        total += count
        parts[_part(frames)] += count
        self_time[frames[-1]] += count
    return ProfileSummary(samples=total, parts=parts.most_common(), top_self=self_time.most_common(top))


def py_spy() -> str | None:
    """The py-spy executable (next to this Python, else on PATH), or None."""
    local = Path(sys.executable).parent / "py-spy"
    return str(local) if local.is_file() else shutil.which("py-spy")


def profile_run(pid: int, run: Callable[[], object], raw_path: Path, rate_hz: int = 100) -> ProfileSummary | str:
    """Record ``pid`` with py-spy while ``run()`` runs; the summary, or why there is none."""
    exe = py_spy()
    if exe is None:
        return "py-spy is not installed (pip install py-spy) : no profile"
    raw_path.parent.mkdir(parents=True, exist_ok=True)
    spy = subprocess.Popen([exe, "record", "--pid", str(pid), "--rate", str(rate_hz), "--format", "raw",
                            "--subprocesses", "--nonblocking", "-o", str(raw_path)], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:
        time.sleep(0.5)  # let py-spy attach before the step starts
        run()
    finally:
        spy.send_signal(signal.SIGINT)
        try:
            _, err = spy.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            spy.kill()
            _, err = spy.communicate(timeout=10)
    if not raw_path.is_file():
        return f"py-spy wrote no profile: {(err or b'').decode('utf-8', 'replace').strip()[-300:]}"
    summary = summarise(raw_path.read_text(encoding="utf-8", errors="replace"))
    summary.raw_path = raw_path
    return summary
