"""``harness run``: checks, then each arm in order on a fresh server, then the summary and reports.

An arm that fails to start or dies mid-step is recorded as ``failed`` and the run goes on — unless it is the baseline
(exit 4). An arm that fails because of the harness itself (results disk full, the load generator died, an unexpected
error) is journaled with ``cause: harness`` and stops the run (exit 4); ``--resume`` redoes it on a fresh server.
Ctrl-C / SIGTERM stop every server the run started and leave a run directory that ``--resume`` completes (exit 4,
``ROLLOUT_INTERRUPTED``: to CI a run that did not finish has failed, not 130); a second signal forces the stop
(servers killed at once), is journaled the same way, and exits 4 too.

A prediction (``harness predict``: ``prediction.json`` in the run directory) stays one however its summary is built:
at the end of the run, after ``--resume``, and in ``harness report`` (:mod:`harness.rundir.prediction`).

A simulated scenario with ``engine.sim_clock: virtual`` runs the same way with every arm on one virtual clock
(:mod:`harness.run.virtual_arm`, docs/virtual-clock.md): no server process, no load runner, no sleeping.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import threading
from pathlib import Path
from typing import Any

from harness.config import Scenario, ScenarioError
from harness.core.atomic import write_json_atomic, write_text_atomic
from harness.core.exit_codes import ROLLOUT_INTERRUPTED, ExitCode
from harness.plan.checks.runner import has_errors, run_checks
from harness.plan.validate.gate import validation_gate
from harness.report.writers import render_run, summary_json_text
from harness.run.arm import ArmResult, ArmRunner
from harness.run.arm_errors import ArmInterrupted
from harness.run.backend import ArmBackend
from harness.run.context import RunContext
from harness.run.options import BadRunInput, RunOptions, RunResult
from harness.run.prepare import completed_state, prepare_run
from harness.run.signals import cancel_on_signals
from harness.rundir import journal
from harness.rundir.layout import RunDir
from harness.rundir.prediction import attach_from_run, read_prediction
from harness.schema.summary import CheckItem
from harness.secrets.redact import secret_values
from harness.workload.plan import LoadConfigError, build_request_plan
from harness.workload.replay import TraceLoadError

_FILE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EACCES, errno.EFBIG}


def _is_file_error(exc: OSError) -> bool:
    """A failure to write the run directory (not, say, a connection error escaping from a library)."""
    return exc.errno in _FILE_ERRNOS or exc.filename is not None


def _write_failure(exc: OSError, run_dir: Path | None) -> RunResult:
    """A run that could not write its results (disk full, read-only, gone): one clear message, exit 4."""
    what = f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    head = "cannot write the run's results" + (" (the disk is full)" if full else "") \
        if exc.errno in _FILE_ERRNOS else "a file operation of the run failed"
    where = (f"; what was written so far stays in {run_dir}: {'free space' if full else 'fix that'}, then "
             f"`harness run --resume {run_dir}` or `harness report {run_dir}`") if run_dir is not None else ""
    return RunResult(run_dir, ExitCode.FAILED, message=f"{head}: {what}{where}")


def run_rollout(scenario_path: Path | None, opts: RunOptions, *, say: Any = print,
                cancel: threading.Event | None = None) -> RunResult:
    """Run (or resume) a rollout; never raises for bad input, server failures or a results disk that fills up."""
    try:
        scenario, run, run_id, manifest = prepare_run(scenario_path, opts)
    except (ScenarioError, BadRunInput) as exc:
        return RunResult(None, ExitCode.BAD_INPUT, message=str(exc))
    except OSError as exc:
        if not _is_file_error(exc):
            raise
        return _write_failure(exc, None)
    try:
        return _run_prepared(scenario, run, run_id, manifest, opts, say=say, cancel=cancel)
    except OSError as exc:
        if not _is_file_error(exc):
            raise
        return _write_failure(exc, run.root)
    except KeyboardInterrupt:  # Ctrl-C outside the arms (checks, validation, the reports): nothing is left running
        return RunResult(run.root, ROLLOUT_INTERRUPTED, message=f"interrupted; what was measured stays in {run.root}: "
                         f"`harness run --resume {run.root}` continues it (`harness report {run.root}` rebuilds "
                         "the reports)")


def _run_prepared(scenario: Scenario, run: RunDir, run_id: str, manifest: dict[str, Any], opts: RunOptions, *,
                  say: Any, cancel: threading.Event | None) -> RunResult:
    checks = run_checks(scenario, host=opts.host, mode="run", allow_unpinned=opts.allow_unpinned)
    write_json_atomic(run.checks, [c.model_dump() for c in checks])
    if has_errors(checks):
        errors = "\n".join(f"  {c.name}{' [' + c.arm + ']' if c.arm else ''}: {c.message}"
                           for c in checks if c.level == "error")
        return RunResult(run.root, ExitCode.BAD_INPUT, checks=checks, message=f"pre-flight checks failed:\n{errors}")
    problem = _workload_problem(scenario, _scenario_dir(manifest))
    if problem is not None:
        return RunResult(run.root, ExitCode.BAD_INPUT, checks=checks, message=problem)
    items, problem = validation_gate(scenario, opts.validate, run.validation, require=opts.require_validation,
                                     say=say)
    checks += items
    if problem is not None:
        return RunResult(run.root, ExitCode.BAD_INPUT, checks=checks, message=problem)
    ctx = RunContext(scenario=scenario, run=run, run_id=run_id, manifest=manifest, host=opts.host,
                     secrets=secret_values(scenario.engine.env), say=say, allow_unpinned=opts.allow_unpinned,
                     scenario_dir=_scenario_dir(manifest))
    only = set(manifest.get("only") or opts.only or [a.name for a in scenario.arms])
    finished, done_steps = completed_state(run)
    if opts.resume is not None:
        manifest.setdefault("resumed", []).append({"finished_arms": sorted(finished), "steps": done_steps})
        ctx.save_manifest()
        prediction = read_prediction(run.root)  # read (and checked) in prepare_run
        if prediction is not None:
            say(f"resuming a PREDICTED run: profile {prediction.profile.name} on the {prediction.clock} clock; "
                "its summary and reports stay marked PREDICTED")
    results: list[ArmResult] = []
    backend = _virtual_backend(scenario, run)
    if backend is None:  # the real clock: a warm load runner while the first server boots
        from harness.load import prewarm_runner, shutdown_runners

        prewarm_runner()
        try:
            outcome = _run_arms(ctx, scenario, only, finished, done_steps, results, cancel, checks)
        finally:
            shutdown_runners()
    else:
        outcome = _run_arms(ctx, scenario, only, finished, done_steps, results, cancel, checks, backend)
    if outcome is not None:
        return outcome
    return finish(run, opts, say=say, checks=checks)


def _virtual_backend(scenario: Scenario, run: RunDir) -> ArmBackend | None:
    """The backend every arm of a virtual-clock run shares (one clock, one disk), or None for the real clock (each
    :class:`ArmRunner` then makes its own :class:`~harness.run.backend.RealBackend`)."""
    if scenario.engine.sim_clock != "virtual":
        return None
    from harness.run.virtual_arm import VirtualBackend
    from harness.virtual.world import VirtualWorld

    return VirtualBackend(VirtualWorld.begin(latest_stamp(run)))


def latest_stamp(run: RunDir) -> int | None:
    """The latest monotonic stamp the run's journals hold (a resumed virtual run's clock goes on after it)."""
    stamps = [e.end_ns for e in journal.read_step_entries(run, strict=False)]
    stamps += [e.at_ns for e in journal.read_drill_events(run, strict=False)]
    return max(stamps) if stamps else None


def _scenario_dir(manifest: dict[str, Any]) -> Path:
    """Relative paths in a scenario (a trace file) are relative to the scenario file's directory."""
    source = manifest.get("scenario_file")
    return Path(source).resolve().parent if source else Path.cwd()


def _workload_problem(scenario: Scenario, base_dir: Path) -> str | None:
    """Build every step's request plan before any server starts, so bad workload input fails fast (exit 2)."""
    for index, level in enumerate(scenario.steps.levels):
        try:
            build_request_plan(scenario.workload, level, step_index=index, max_model_len=scenario.engine.max_model_len,
                       base_dir=base_dir)
        except (LoadConfigError, TraceLoadError) as exc:
            return f"workload (steps.levels[{index}]): {exc}"
    return None


def _run_arms(ctx: RunContext, scenario: Scenario, only: set[str], finished: set[str], done_steps: dict[str, int],
              results: list[ArmResult], cancel: threading.Event | None,
              checks: list[CheckItem], backend: ArmBackend | None = None) -> RunResult | None:
    """Each arm in order (on ``backend``'s clock; None: the real one); returns a result only when the run stops
    early (interrupted)."""
    with cancel_on_signals(cancel or ctx.cancel) as ev:
        ctx.cancel = ev
        for index, arm in enumerate(scenario.arms):
            if arm.name not in only and index != 0:
                continue
            if arm.name in finished:
                continue
            outcome = _attempt_arm(ctx, ArmRunner(ctx, arm, start_step=done_steps.get(arm.name, 0),
                                                  backend=backend), checks, f"arm {arm.name}")
            if isinstance(outcome, RunResult):
                return outcome
            results.append(outcome)
            if outcome.status == "failed" and index == 0:
                ctx.say("the baseline failed: no comparison is possible; stopping")
                return None
        return _run_noise_floor(ctx, scenario, finished, done_steps, checks, backend)
    return None


def _attempt_arm(ctx: RunContext, runner: ArmRunner, checks: list[CheckItem], what: str) -> ArmResult | RunResult:
    """One arm; a :class:`RunResult` when the run stops here (interrupted, a forced stop, the harness's own
    failure), each journaled so that ``--resume`` redoes the arm."""
    root = ctx.run.root
    resume = f"`harness run --resume {root}`"
    try:
        try:
            result = runner.run()
        except ArmInterrupted:
            ctx.record_arm(runner.arm.name, "interrupted")
            ctx.say(f"interrupted: every server stopped; resume with {resume}")
            return RunResult(root, ROLLOUT_INTERRUPTED, checks=checks,
                             message=f"interrupted during {what}; resume with {resume}")
    except KeyboardInterrupt:  # the second Ctrl-C / SIGTERM (harness.run.signals): force the stop
        return _forced_stop(ctx, runner, checks, what)
    if result.status == "failed" and result.cause == "harness":
        return RunResult(root, ExitCode.FAILED, checks=checks, message=_harness_failure(result, what, root))
    return result


def _harness_failure(result: ArmResult, what: str, root: Path) -> str:
    """The message of an arm the harness's own failure stopped (the disk filling up said as such)."""
    why = str((result.failure or {}).get("message", "unknown"))
    then = (f"`harness run --resume {root}` redoes {result.arm} (the harness's failure, not the server's or the "
            f"tier's) or `harness report {root}`")
    if any(os.strerror(code) in why for code in (errno.ENOSPC, errno.EDQUOT)):
        return (f"cannot write the run's results (the disk is full): {why}; what was written so far stays in {root}: "
                f"free space, then {then}")
    return f"the harness itself failed during {what} (not the server, not the tier): {why}; " \
        f"what was measured stays in {root}: fix that, then {then}"


def _forced_stop(ctx: RunContext, runner: ArmRunner, checks: list[CheckItem], what: str) -> RunResult:
    """Stop the arm's server at once, journal the arm as interrupted, say so; exit 4 like a first interrupt."""
    try:
        gone = runner.force_stop()
    except Exception:  # a stop that fails must not hide the message below
        gone = False
    with contextlib.suppress(OSError):
        ctx.record_arm(runner.arm.name, "interrupted", forced=True)
    if runner.arm.server is not None:  # an external deployment: the harness never stops it
        servers = f"the external server of {runner.arm.name} was left running"
    else:
        servers = ("servers stopped" if gone
                   else f"the server of {runner.arm.name} may still run: `harness cleanup --all-stale`")
    message = (f"second interrupt: forced stop during {what}; {servers}; resume with "
               f"`harness run --resume {ctx.run.root}`")
    ctx.say(message)
    return RunResult(ctx.run.root, ROLLOUT_INTERRUPTED, checks=checks, message=message)


def _run_noise_floor(ctx: RunContext, scenario: Scenario, finished: set[str], done_steps: dict[str, int],
                     checks: list[CheckItem], backend: ArmBackend | None = None) -> RunResult | None:
    """The baseline's configuration again, last (A/A), when ``rules.noise_floor.rerun_baseline`` asks for it."""
    from harness.decision.noise_floor import aa_name

    if not scenario.rules.noise_floor.rerun_baseline:
        return None
    base = scenario.arms[0]
    rerun = base.model_copy(update={"name": aa_name(base.name)})
    if rerun.name in finished:
        return None
    ctx.say(f"[{rerun.name}] re-running the baseline's configuration to measure the noise floor (A/A)")
    outcome = _attempt_arm(ctx, ArmRunner(ctx, rerun, start_step=done_steps.get(rerun.name, 0), backend=backend),
                           checks, "the A/A re-run")
    return outcome if isinstance(outcome, RunResult) else None


def finish(run: RunDir, opts: RunOptions, *, say: Any = print, checks: list[CheckItem] | None = None) -> RunResult:
    """Build requests.parquet, summary.json and the reports from the run directory."""
    from harness.decision.summarize import rebuild_summary
    from harness.rundir.parts import build_requests_parquet

    build_requests_parquet(run.root)
    summary = attach_from_run(run.root, rebuild_summary(run.root))  # a prediction stays PREDICTED
    if opts.write_reports:
        render_run(run.root, summary)
        _rebuild_index(run.root.parent, say)
    else:
        write_text_atomic(run.summary_json, summary_json_text(summary))
    marked = "PREDICTED verdict" if summary.prediction is not None else "verdict"
    return RunResult(run.root, summary.exit_code, summary=summary, checks=checks,
                     message=f"{marked} {summary.verdict}: {summary.verdict_reason}")


def _rebuild_index(results_dir: Path, say: Any) -> None:
    """Refresh results/index.html; a failure (a corrupt sibling run, a full disk) is a warning, never the exit code."""
    from harness.report.index import refresh_index

    problem = refresh_index(results_dir)
    if problem is not None:
        say(f"warning: {problem}")


def copy_run(src: Path, dst: Path) -> None:
    """Copy a run directory (used by tests of `harness report` reproducibility)."""
    shutil.copytree(src, dst)
