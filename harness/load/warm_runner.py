"""Entry point of a warm load runner started by :class:`harness.load.runners.RunnerPool`:
``python -m harness.load.warm_runner RUNNERS_DIR`` runs ``harness.load.locust_runner serve`` under a parent watchdog.

When the harness process that started it dies (even by SIGKILL, so its at-exit cleanup never ran), the runner
stops its own workers, removes the pool's temporary directory (only when the directory's owner record names that
dead process) and exits within a few seconds, in the middle of a step or idle.
"""

# isort: off
from harness.load import locust_runner  # first: it applies gevent's monkey patching

import contextlib
import os
import signal
import sys
from pathlib import Path

import psutil

from harness.load.runners import remove_if_orphaned
from harness.core.exit_codes import ExitCode
from harness.host.watchdog import watch_parent
# isort: on

WORKER_GRACE_S = 2.0


def _stop_workers() -> None:
    """SIGTERM, then SIGKILL, the runner's own child processes (local locust workers)."""
    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.send_signal(signal.SIGTERM)
    _, alive = psutil.wait_procs(children, timeout=WORKER_GRACE_S)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()


def main(argv: list[str]) -> int:
    """Run the warm runner; its temporary directory goes when the harness that made it is gone."""
    runners_dir = Path(argv[0]) if argv else None

    def orphaned() -> None:
        _stop_workers()
        if runners_dir is not None:
            remove_if_orphaned(runners_dir)
        sys.stdout.flush()
        os._exit(ExitCode.FAILED)  # orphaned: the run it served has failed (its harness died)

    watch_parent(orphaned, grace_s=WORKER_GRACE_S + 3.0)
    code = locust_runner.main(["serve"])
    if runners_dir is not None:
        remove_if_orphaned(runners_dir)  # stdin closed because the harness died: nobody else will remove it
    return code


if __name__ == "__main__":
    exit_code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)  # as locust_runner: skip the slow teardown of gevent's hub and thread pool
