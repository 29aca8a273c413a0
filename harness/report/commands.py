"""CLI commands for ``harness report``, ``harness compare`` and ``harness index`` (typer functions; wired in cli.py).

Exit codes: 0 done, 2 bad input (not a run directory, missing or invalid summary.json) with one message on
stderr and no traceback. The renderers (and matplotlib) are imported when a command runs, so importing this
module to build the CLI stays cheap.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from harness.report.load import ReportInputError, check_run_dir
from harness.summary import Summary

EXIT_OK = 0
EXIT_BAD_INPUT = 2
SummaryBuilder = Callable[[Path], Summary]
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

RunDirArg = Annotated[Path, typer.Argument(help="a run directory, e.g. results/<run-id>/", show_default=False)]


def _clean(text: str) -> str:
    """Terminal-safe text: control characters (escape sequences) from summaries are not passed to the terminal."""
    return _CONTROL.sub("?", text)


def _fail(exc: Exception) -> typer.Exit:
    typer.echo(f"error: {_clean(str(exc))}", err=True)
    return typer.Exit(EXIT_BAD_INPUT)


def make_report_command(rebuild: SummaryBuilder | None = None) -> Callable[..., None]:
    """The ``harness report`` command; with ``rebuild`` it recomputes the summary from the raw files first."""

    def report_command(
        run_dir: RunDirArg,
        from_summary: Annotated[bool, typer.Option(
            "--from-summary", help="render from the existing summary.json instead of recomputing it")] = False,
    ) -> None:
        """Rebuild summary.json, summary.md, junit.xml and report.html from a run directory."""
        from harness.report.writers import render_run

        try:
            check_run_dir(run_dir)
            summary = rebuild(run_dir) if rebuild is not None and not from_summary else None
            written = render_run(run_dir, summary)
        except (ReportInputError, ValueError, OSError) as exc:
            raise _fail(exc) from None
        for name, path in written.items():
            typer.echo(f"{name:6s} {_clean(str(path))}")

    return report_command


report_command = make_report_command(None)


def compare_command(
    run_a: RunDirArg,
    run_b: RunDirArg,
    json_out: Annotated[bool, typer.Option("--json", help="print the comparison as JSON")] = False,
) -> None:
    """Show what changed from RUN_A to RUN_B: verdict, decisions, p99 TTFT/ITL, throughput, hit rate (B/A), with
    percentile intervals and B/A ratio intervals computed from both runs' requests.parquet."""
    from harness.report.compare import comparison_lines
    from harness.report.compare_ratios import compare_runs
    from harness.report.writers import html_safe_json

    try:
        check_run_dir(run_a)
        check_run_dir(run_b)
        cmp = compare_runs(run_a, run_b)
    except (ReportInputError, OSError) as exc:
        raise _fail(exc) from None
    if json_out:
        typer.echo(html_safe_json(cmp.model_dump_json(indent=2)))
        return
    for line in comparison_lines(cmp):
        typer.echo(_clean(line))


def index_command(
    results_dir: Annotated[Path, typer.Argument(help="the results folder holding run directories")] = Path("results"),
) -> None:
    """Rebuild results/index.html and index.json: runs with verdict, date, scenario, engine, and p99 TTFT trends."""
    from harness.report.index import write_index

    try:
        written = write_index(results_dir)
    except (ReportInputError, OSError) as exc:
        raise _fail(exc) from None
    for name, path in written.items():
        typer.echo(f"{name:6s} {_clean(str(path))}")
