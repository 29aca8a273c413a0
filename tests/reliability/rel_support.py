"""Helpers of the reliability suite: short, fast simulator scenarios and fault injection driven by the run's progress
lines (imported by the tests as ``rel_support``)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import yaml

DEMO = Path(__file__).resolve().parents[2] / "scenarios" / "demo-sim.yaml"
FAST_STEPS: dict[str, Any] = {
    "levels": [{"concurrency": 4, "duration_s": 1.5}],
    "scrape_interval_s": 0.5, "stream_idle_timeout_s": 5, "drain_timeout_s": 3, "request_timeout_s": 30,
}
READY_RE = re.compile(r"^\[(?P<arm>[^\]]+)\] ready after [0-9.]+ s at (?P<url>http://\S+)$")


def make_scenario(path: Path, tier_root: Path, *, arms: tuple[str, ...] = ("baseline", "cpu-16g", "cpu-16g-disk"),
                  drills: list[dict[str, Any]] | None = None, cpu_tier_bytes: int = 2 << 30,
                  time_scale: float = 0.05, extra_arms: list[dict[str, Any]] | None = None, **over: Any) -> Path:
    """The demo scenario, made fast (time scale, one short step, no warm-up) with disk tiers under ``tier_root``.

    ``cpu_tier_bytes`` shrinks the tiered arm's CPU tier so shared prefixes spill to the disk tier quickly;
    ``extra_arms`` are appended as given; other keyword arguments replace (or, for mappings, update) sections."""
    data = yaml.safe_load(DEMO.read_text())
    data["name"] = path.stem
    data["engine"]["sim_time_scale"] = time_scale
    data["engine"]["readiness_timeout_s"] = 30
    data["steps"] = dict(FAST_STEPS)
    data["drills"] = drills or []
    data["engine"].pop("sim_noise", None)  # deterministic timings unless a test asks for noise
    data["rules"]["noise_floor"] = {"rerun_baseline": False}  # no A/A re-run unless a test asks for it
    by_name = {a["name"]: a for a in data["arms"]}
    chosen = []
    for name in arms:
        arm = dict(by_name[name])
        if arm["tier"] == "tiered":
            arm["offload"] = dict(arm["offload"], cpu_bytes_to_use=cpu_tier_bytes)
            arm["offload"]["secondary_tiers"] = [dict(t, root_dir=str(tier_root)) for t in
                                                 arm["offload"]["secondary_tiers"]]
        chosen.append(arm)
    for extra in extra_arms or []:
        chosen.append(extra)
    data["arms"] = chosen
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def admin_faults(base_url: str, **faults: Any) -> dict[str, Any]:
    """Change the simulator's faults at run time (loopback admin endpoint)."""
    resp = httpx.post(base_url + "/admin/faults", json=faults, timeout=5.0, trust_env=False)
    resp.raise_for_status()
    return dict(resp.json())


class Progress:
    """A ``say`` callback: keeps the progress lines, knows each arm's URL, runs actions on matching lines.

    ``on(pattern, action)`` runs ``action(line, progress)`` once, synchronously, when a line matches; ``later``
    runs a function on a thread after a delay (joined by :meth:`join`)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.urls: dict[str, str] = {}
        self._rules: list[tuple[re.Pattern[str], Callable[[str, Progress], object], list[bool]]] = []
        self._threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []

    def on(self, pattern: str, action: Callable[[str, Progress], object]) -> None:
        self._rules.append((re.compile(pattern), action, [False]))

    def later(self, delay_s: float, fn: Callable[[], object]) -> None:
        def run() -> None:
            time.sleep(delay_s)
            try:
                fn()
            except Exception as exc:  # reported by join()
                self.errors.append(exc)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        self._threads.append(t)

    def join(self) -> None:
        for t in self._threads:
            t.join(timeout=30)
        assert not self.errors, self.errors

    def __call__(self, message: str) -> None:
        self.lines.append(message)
        m = READY_RE.match(message)
        if m:
            self.urls[m["arm"]] = m["url"]
        for pattern, action, done in self._rules:
            if not done[0] and pattern.search(message):
                done[0] = True
                action(message, self)


def tiered_arm(name: str, root_dir: Path, cpu_tier_bytes: int = 2 << 30) -> dict[str, Any]:
    """A CPU + disk arm like the demo's, with its own disk-tier directory."""
    return {"name": name, "tier": "tiered",
            "offload": {"kind": "vllm-connector", "spec_name": "TieringOffloadingSpec",
                        "cpu_bytes_to_use": cpu_tier_bytes, "eviction_policy": "lru",
                        "secondary_tiers": [{"type": "fs", "root_dir": str(root_dir), "size_gib": 64}]}}


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def child_pids() -> set[int]:
    """This process's descendants now."""
    return {p.pid for p in psutil.Process().children(recursive=True)}


def assert_no_new_children(before: set[int], wait_s: float = 10.0) -> None:
    """No descendant that was not there ``before`` is still running (waits up to ``wait_s`` for them to go)."""
    me = psutil.Process()
    deadline = time.monotonic() + wait_s
    while True:
        left = [p for p in me.children(recursive=True) if p.pid not in before and _alive(p)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    names = []
    for p in left:
        try:
            names.append(f"{p.pid}: {' '.join(p.cmdline())[:160]}")
        except psutil.Error:
            continue
    assert not names, f"processes left running: {names}"


@contextlib.contextmanager
def small_tmpfs(where: Path, size: str) -> Iterator[bool]:
    """Mount a tmpfs of ``size`` at ``where`` (root only); yields False (and mounts nothing) where that is not
    allowed or ``HARNESS_TEST_NO_TMPFS`` is set."""
    where.mkdir(parents=True, exist_ok=True)
    mount = shutil.which("mount")
    if os.geteuid() != 0 or mount is None or os.environ.get("HARNESS_TEST_NO_TMPFS"):
        yield False
        return
    ok = subprocess.run([mount, "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True,
                        timeout=10, check=False).returncode == 0
    try:
        yield ok
    finally:
        if ok:
            subprocess.run(["umount", str(where)], capture_output=True, timeout=10, check=False)


def file_sums(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` by relative path: proof that nothing in it changed."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}
