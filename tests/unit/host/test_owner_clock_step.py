"""A process's identity survives a wall-clock step: the start in seconds since boot decides on this boot, the epoch
start only where no boot-relative start is known (the cause of a CI run in which every watchdog fired at once:
psutil's epoch start moves with the kernel's ``btime`` when the clock is stepped)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from harness.core.exit_codes import ExitCode
from harness.host import owner, watchdog
from harness.host.owner import ProcessRef, current, parse_pid_start, process_alive

LINUX_PROC = owner.since_boot(os.getpid()) is not None and bool(owner.boot_id())
needs_proc = pytest.mark.skipif(not LINUX_PROC, reason="needs Linux /proc (start in seconds since boot, boot id)")


def test_old_and_new_texts_parse() -> None:
    assert parse_pid_start("12:5.000") == ProcessRef(12, 5.0, None, "")
    assert parse_pid_start("12:5.000:3.25:abc") == ProcessRef(12, 5.0, 3.25, "abc")
    for bad in ("", "12", "12:5:1", "12:5:x:abc", "12:5:-1:abc", "12:5:inf:abc", "0:5", "12:nan", "12:5:1:2:3"):
        assert parse_pid_start(bad) is None, bad
    assert parse_pid_start("12:5.000:3.25:") == ProcessRef(12, 5.0, None, "")  # no boot: epoch start only


@needs_proc
def test_this_process_round_trips_through_its_text() -> None:
    me = current()
    ref = parse_pid_start(me.text())
    assert ref is not None and ref.pid == os.getpid() and ref.boot == owner.boot_id()
    assert process_alive(*ref)


@needs_proc
def test_a_stepped_clock_does_not_make_a_live_process_look_gone() -> None:
    me = current()
    for step_s in (-3600.0, -30.0, 30.0, 86_400.0):  # the epoch start as read before a step of that size
        assert process_alive(me.pid, me.start + step_s, me.since_boot, me.boot), step_s
        assert not process_alive(me.pid, me.start + step_s)  # what the epoch comparison alone would say


@needs_proc
def test_a_recycled_pid_or_another_boot_is_not_the_process() -> None:
    me = current()
    assert me.since_boot is not None
    assert not process_alive(me.pid, me.start, me.since_boot + 5.0, me.boot)  # same pid, another start: recycled
    # a record from another boot falls back to the epoch start (a since-boot number means nothing across boots)
    assert process_alive(me.pid, me.start, me.since_boot + 5.0, "another-boot")
    assert not process_alive(me.pid, me.start + 30.0, me.since_boot, "another-boot")


@needs_proc
def test_a_watchdog_keeps_its_process_through_a_clock_step() -> None:
    """A child watching a parent whose epoch start reads 120 s off (as after a step) keeps running; once the
    parent is gone it ends."""
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        ref = owner.ref_of(parent.pid)
        stepped = f"{ref.pid}:{ref.start - 120.0:.3f}:{ref.since_boot:.2f}:{ref.boot}"
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; from harness.host.watchdog import watch_parent; "
             "watch_parent(lambda: None, interval_s=0.1, grace_s=0.1); time.sleep(20)"],
            env={**os.environ, watchdog.ENV: stepped})
        try:
            time.sleep(1.5)
            assert child.poll() is None, "the watchdog took a clock step for its parent's death"
            parent.kill()
            parent.wait(timeout=10)
            assert child.wait(timeout=10) == ExitCode.FAILED  # orphaned: the run it served has failed
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=10)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(timeout=10)
