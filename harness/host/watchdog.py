"""Parent watchdog: a process the harness started (the simulator, a load runner) ends itself when the harness
process that started it dies, SIGKILL included.

The launcher passes its own identity in ``HARNESS_PARENT`` (``"pid:start time"``, see
:mod:`harness.host.owner`); only the harness's launchers set it, so a simulator a user starts by hand runs until
told to stop. A daemon thread polls the parent with psutil every ``interval_s`` seconds; once the parent is gone
it calls ``on_death`` (which asks the process to shut down cleanly) and, if the process is still there
``grace_s`` later, ends it with ``os._exit``. In a gevent-patched process (the load runner) the thread is a real
OS thread, so it runs even while the event loop is busy.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Mapping

from harness.core.exit_codes import ExitCode
from harness.host.owner import ProcessRef, current, parse_pid_start, process_alive

ENV = "HARNESS_PARENT"


def child_env() -> dict[str, str]:
    """The environment entry that ties a child to this process."""
    return {ENV: current().text()}


def parent_from_env(environ: Mapping[str, str] | None = None) -> ProcessRef | None:
    """The harness process named in ``HARNESS_PARENT`` (pid, start time), or None (not set or malformed)."""
    text = (environ if environ is not None else os.environ).get(ENV, "")
    return parse_pid_start(text) if text else None


def _spawn(target: Callable[[Callable[[float], None]], None]) -> None:
    """Start ``target(sleep)`` on a real OS thread, also under gevent's monkey patching."""
    gevent_monkey = sys.modules.get("gevent.monkey")
    if gevent_monkey is not None and gevent_monkey.is_module_patched("threading"):
        start_new = gevent_monkey.get_original("_thread", "start_new_thread")
        sleep = gevent_monkey.get_original("time", "sleep")
        start_new(target, (sleep,))
        return
    threading.Thread(target=target, args=(time.sleep,), name="parent-watchdog", daemon=True).start()


def watch_parent(on_death: Callable[[], None], *, parent: ProcessRef | None = None,
                 interval_s: float = 0.5, grace_s: float = 5.0) -> bool:
    """Watch the parent named in the environment (or ``parent``); returns False when there is none to watch."""
    who = parent if parent is not None else parent_from_env()
    if who is None:
        return False

    def run(sleep: Callable[[float], None]) -> None:
        while process_alive(*who):
            sleep(interval_s)
        try:
            on_death()
        finally:
            sleep(grace_s)
            os._exit(ExitCode.FAILED)  # orphaned: the run this process served has failed (its harness died)

    _spawn(run)
    return True
