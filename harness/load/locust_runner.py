"""The locust process that runs one step: ``python -m harness.load.locust_runner run --spec FILE``.

Locust drives the users through its library API (:mod:`harness.load.locust_users`): an ``Environment`` with a
``LoadTestShape`` for the step and a local runner for one process, or a master runner with worker processes
(``StepSpec.processes``) and/or workers on other machines (``StepSpec.remote_workers``; start each with
``python -m harness.load.locust_runner worker --master-host H --master-port P``), see :mod:`.master`.

Timing is never taken from locust's statistics: :class:`harness.load.driver.StepDriver` records every
request itself. Locust (gevent) patches the standard library at import, so this module patches first thing
and must only ever run in its own process (:func:`harness.load.run_step` starts it as a subprocess). The
outcome is written to ``StepSpec.outcome_path`` whatever happens; exit code 0 (ran), 2 (bad workload),
4 (runner failure).
"""

import functools
import importlib.metadata
import os

from gevent import monkey

# gevent looks up plugin entry points ~25 times while patching (about 1 s with a large environment): cache the
# lookup while we patch, once; locust must not patch a second time.
_entry_points = importlib.metadata.entry_points
importlib.metadata.entry_points = functools.lru_cache(maxsize=None)(_entry_points)  # type: ignore[assignment]
monkey.patch_all()
importlib.metadata.entry_points = _entry_points
os.environ["LOCUST_SKIP_MONKEY_PATCH"] = "1"

# ruff: noqa: E402  (imports after the monkey patch, on purpose)
import argparse
import contextlib
import json
import logging
import sys
import time
from pathlib import Path

from gevent.fileobject import FileObjectPosix

from harness.core.atomic import write_text_atomic
from harness.core.exit_codes import ExitCode
from harness.host.watchdog import watch_parent
from harness.load.locust_users import quiet_logging, run_local, warm_pyarrow
from harness.load.master import run_master, say_run_over
from harness.load.spec import RunnerOutcome, StepSpec
from harness.load.worker import INTERRUPTED, run_worker
from harness.workload.plan import LoadConfigError
from harness.workload.replay import TraceLoadError

log = logging.getLogger("harness.load.runner")
READY, DONE = "harness-load-runner: ready", "harness-load-runner: done"
MAX_STEPS_PER_RUNNER = 100_000


def _write_outcome(spec: StepSpec, outcome: RunnerOutcome) -> None:
    if spec.outcome_path:
        write_text_atomic(Path(spec.outcome_path), outcome.model_dump_json())


def _failed(spec: StepSpec, message: str) -> RunnerOutcome:
    now, wall = time.perf_counter_ns(), time.time_ns()
    return RunnerOutcome(start_ns=now, end_ns=now, start_wall_ns=wall, end_wall_ns=wall, error=message,
                         processes=spec.processes, harness_failure=True)


def cmd_run(spec_path: Path) -> int:
    """Run the step described in ``spec_path`` and write its outcome."""
    try:
        spec = StepSpec.model_validate(json.loads(spec_path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        log.error("cannot read the step spec %s: %s", spec_path, exc)
        return ExitCode.BAD_INPUT
    try:
        distributed = spec.processes > 1 or spec.remote_workers > 0
        outcome = run_master(spec) if distributed else run_local(spec)
    except (LoadConfigError, TraceLoadError) as exc:
        _write_outcome(spec, _failed(spec, str(exc)).model_copy(update={"bad_input": True, "harness_failure": False}))
        return ExitCode.BAD_INPUT
    except Exception as exc:
        log.exception("load runner failed")
        _write_outcome(spec, _failed(spec, f"load runner failed: {type(exc).__name__}: {exc}"))
        return ExitCode.FAILED
    _write_outcome(spec, outcome)
    return ExitCode.OK


def cmd_run_over(request_path: Path) -> int:
    """Tell the remote workers of a run that it is over (``BYE <request file>``: bind host, port, expected, wait)."""
    try:
        request = json.loads(request_path.read_text(encoding="utf-8")[:10_000])
        bind, port, expected, wait_s = (str(request["bind_host"]), int(request["port"]), int(request["expected"]),
                                        float(request["wait_s"]))
        outcome = Path(str(request["outcome_path"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.error("cannot read the run-over request %s: %s", request_path, exc)
        return ExitCode.BAD_INPUT
    try:
        told = say_run_over(bind, port, expected, wait_s)
    except Exception as exc:  # the port may be taken: the workers end on their idle timeout instead
        log.error("cannot tell the workers the run is over: %s: %s", type(exc).__name__, exc)
        told = -1
    with contextlib.suppress(OSError):
        write_text_atomic(outcome, json.dumps({"told": told}))
    return ExitCode.OK if told >= 0 else ExitCode.FAILED


def cmd_serve() -> int:
    """A warm runner: run one step per ``RUN <spec file>`` line on stdin until ``EXIT`` or end of input
    (``BYE <request file>`` tells a run's remote workers that it is over).

    Startup (interpreter, gevent, locust, pydantic, pyarrow: seconds on a busy host) is paid once, not per
    step, so consecutive steps (and drill phases) follow each other closely.
    """
    stdin = FileObjectPosix(sys.stdin.fileno(), "rb", close=False)
    warm_pyarrow()
    print(READY, flush=True)
    for _ in range(MAX_STEPS_PER_RUNNER):
        line = stdin.readline().decode("utf-8", "replace").strip()
        if not line or line == "EXIT":
            return ExitCode.OK
        verb, _, arg = line.partition(" ")
        if verb == "BYE" and arg:
            cmd_run_over(Path(arg))
            print(f"{DONE} {arg}", flush=True)
            continue
        if verb != "RUN" or not arg:
            log.error("unknown command %r (expected 'RUN <spec file>' or 'EXIT')", line)
            continue
        cmd_run(Path(arg))
        print(f"{DONE} {arg}", flush=True)
    return ExitCode.OK


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``run --spec FILE`` (one step), ``serve`` (warm runner), or ``worker --master-host H ...``."""
    parser = argparse.ArgumentParser(prog="python -m harness.load.locust_runner", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="run one step from a JSON step spec")
    run.add_argument("--spec", required=True, type=Path)
    sub.add_parser("serve", help="run steps given as 'RUN <spec file>' lines on stdin (a warm runner)")
    worker = sub.add_parser("worker", help="join a master (another machine's step) as a load worker")
    worker.add_argument("--master-host", required=True)
    worker.add_argument("--master-port", required=True, type=int)
    worker.add_argument("--connect-timeout", type=float, default=None,
                        help="wait up to this many seconds for the master's port (default: locust's own retries)")
    worker.add_argument("--status-file", type=Path, default=None, help="write what was served here (JSON)")
    args = parser.parse_args(argv)
    quiet_logging()
    if args.cmd == "run":
        return cmd_run(args.spec)
    if args.cmd == "serve":
        return cmd_serve()
    watch_parent(lambda: os._exit(INTERRUPTED))  # started by `harness load-worker`: end with it
    return run_worker(args.master_host, args.master_port, args.connect_timeout, args.status_file)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # everything is on disk; skip the slow teardown of gevent's hub and thread pool
