"""CLI commands for ``harness report``, ``harness compare`` and ``harness index`` (typer functions; wired in cli.py).

Exit codes (shared/DESIGN.md): 0 done; 2 bad input (not a run directory; a missing, corrupt or wrongly shaped
file, named with its field; a scenario.yaml the loader refuses); 4 a report that could not be written (disk
full, read-only: the message names the file and says what was kept) or any unexpected error (one line naming
what failed; with ``--debug`` / ``HARNESS_DEBUG=1`` it goes on to :mod:`harness.core.boundary`, which adds the
traceback). Never 1 (CI reads 1 as no-go) and never a traceback. matplotlib (the HTML page) and pandas (the ratio
intervals of ``compare``) are imported when a command runs, so importing this module to build the CLI stays cheap.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, TypeVar

import typer
from pydantic import ValidationError

from harness.config import ScenarioError
from harness.core.boundary import DEBUG_ENV, debug_enabled, short_message
from harness.core.exit_codes import ExitCode
from harness.core.term import safe_text
from harness.report.compare import Comparison, comparison_lines
from harness.report.load import ReportInputError, check_run_dir, load_summary
from harness.report.writers import html_safe_json, render_run
from harness.rundir.bounded import describe_errors
from harness.rundir.errors import ReportWriteError
from harness.rundir.prediction import attach_from_run
from harness.schema.summary import Summary

SummaryBuilder = Callable[[Path], Summary]
T = TypeVar("T")

RunDirArg = Annotated[Path, typer.Argument(help="a run directory, e.g. results/<run-id>/", show_default=False)]


def _say_error(message: str, code: int) -> typer.Exit:
    typer.echo(f"error: {safe_text(message)}", err=True)
    return typer.Exit(code)


def _write_failure(exc: ReportWriteError, output: str, rerun: str) -> str:
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
    head = f"cannot write {output}" + (" (the disk is full)" if full else "")
    kept = []
    if exc.written:
        kept.append(f"rewritten before it: {', '.join(p.name for p in exc.written)}")
    kept.append(f"kept as they were (each file is replaced whole or not at all): "
                f"{', '.join(p.name for p in exc.unchanged)}")
    return (f"{head}: {exc.strerror}: {exc.path}; {'; '.join(kept)}; the run's own files are untouched: "
            f"{'free space' if full else 'fix that'}, then `{rerun}`")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def guarded(what: str, rerun: str, work: Callable[[], T], output: str = "the report") -> T:
    """Run ``work``; turn every failure into one message and the exit code the CLI contract gives it.

    ``what`` starts messages about the input or an unexpected error, ``output`` names what a failed write was
    writing, and ``rerun`` is the command to run again once the problem is fixed."""
    try:
        return work()
    except (ReportInputError, ScenarioError) as exc:
        raise _say_error(str(exc), ExitCode.BAD_INPUT) from None
    except ReportWriteError as exc:
        raise _say_error(_write_failure(exc, output, rerun), ExitCode.FAILED) from None
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename is not None else ""
        raise _say_error(f"{what}: a file operation failed: {exc.strerror or exc}{where}", ExitCode.FAILED) from None
    except ValidationError as exc:  # a summary the run's files do not make
        raise _say_error(f"{what}: {describe_errors(exc)}", ExitCode.BAD_INPUT) from None
    except ValueError as exc:  # the analysis refused the run's data (it names the file where it can)
        raise _say_error(f"{what}: {_first_line(exc)}", ExitCode.BAD_INPUT) from None
    except Exception as exc:
        if debug_enabled():
            raise  # harness.cli.main's boundary prints the traceback (and still exits 4)
        raise _say_error(f"{what}: unexpected {short_message(exc)} (run with --debug or {DEBUG_ENV}=1 for the "
                         "traceback)", ExitCode.FAILED) from None


def make_report_command(rebuild: SummaryBuilder | None = None) -> Callable[..., None]:
    """The ``harness report`` command; with ``rebuild`` it recomputes the summary from the raw files first."""

    def report_command(
        run_dir: RunDirArg,
        from_summary: Annotated[bool, typer.Option(
            "--from-summary", help="render from the existing summary.json instead of recomputing it")] = False,
    ) -> None:
        """Rebuild summary.json, summary.md, junit.xml and report.html from a run directory."""
        missing: list[str] = []

        def work() -> dict[str, Path]:
            check_run_dir(run_dir)
            if rebuild is None or from_summary:  # a prediction's record marks it even where summary.json lost it
                return render_run(run_dir, attach_from_run(run_dir, load_summary(run_dir)))
            summary = rebuild(run_dir)
            missing.extend(summary.records_missing)
            return render_run(run_dir, summary)

        written = guarded(f"cannot rebuild the report of {run_dir}", f"harness report {run_dir}", work)
        for name, path in written.items():
            typer.echo(f"{name:6s} {safe_text(path)}")
        if missing:  # written, and said: no verdict rests on records that are not all there (exit 4, not 1)
            raise _say_error(f"{run_dir}: {missing[0]}", ExitCode.FAILED)

    return report_command


report_command = make_report_command(None)


def compare_command(
    run_a: RunDirArg,
    run_b: RunDirArg,
    json_out: Annotated[bool, typer.Option("--json", help="print the comparison as JSON")] = False,
) -> None:
    """Show what changed from RUN_A to RUN_B: verdict, decisions, p99 TTFT/ITL, throughput, hit rate (B/A), with
    percentile intervals and B/A ratio intervals computed from both runs' requests.parquet."""
    from harness.report.compare_ratios import compare_runs  # pandas: only when two runs are compared

    def work() -> Comparison:
        check_run_dir(run_a)
        check_run_dir(run_b)
        return compare_runs(run_a, run_b)

    cmp = guarded(f"cannot compare {run_a} with {run_b}", f"harness compare {run_a} {run_b}", work)
    if json_out:
        typer.echo(html_safe_json(cmp.model_dump_json(indent=2)))
        return
    for line in comparison_lines(cmp):
        typer.echo(safe_text(line))


def index_command(
    results_dir: Annotated[Path, typer.Argument(help="the results folder holding run directories")] = Path("results"),
) -> None:
    """Rebuild results/index.html and index.json: runs with verdict, date, scenario, engine, and p99 TTFT trends.
    A run whose summary.json cannot be read is listed as unreadable, with the reason."""
    from harness.report.index import write_index

    written = guarded(f"cannot rebuild the index of {results_dir}", f"harness index {results_dir}",
                      lambda: write_index(results_dir), output="the results index")
    for name, path in written.items():
        typer.echo(f"{name:6s} {safe_text(path)}")
