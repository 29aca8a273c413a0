"""``harness predict SCENARIO --profile NAME``: the typer command (wired in cli.py) and what the terminal says.

Every line about the outcome says PREDICTED: the banner before the run (the profile, its model and GPU, the
clock), each change the mapping made and each warning, and the verdict line after it. Exit codes follow the
verdict as ``harness run``'s do (0 go, 1 no-go, 3 hold, 5 slo-unmet; 4 the run failed); a refusal (what the
simulator cannot model) or bad input exits 2 with the field named, never a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from harness.core.exit_codes import ExitCode
from harness.core.term import safe_text
from harness.predict.mapping import Mapped
from harness.predict.run import PredictOptions, run_prediction
from harness.run.live import LiveOutput
from harness.run.options import RunResult

console = Console()
err_console = Console(stderr=True)


def _banner(mapped: Mapped, opts: PredictOptions) -> None:
    profile = opts.profile or (opts.profile_file.stem if opts.profile_file else "?")
    console.print(Text("PREDICTED", style="bold magenta") + Text(
        f" · SIMULATED: {mapped.scenario.name} on profile {profile} (sim_clock {opts.clock}); a model of the "
        "hardware, not a measurement"), highlight=False, soft_wrap=True)
    for change in mapped.changes:
        console.print(Text(f"  mapped  {safe_text(change)}"), highlight=False, soft_wrap=True)
    for warning in mapped.warnings:
        console.print(Text("  WARNING ", style="bold yellow") + Text(safe_text(warning)), highlight=False,
                      soft_wrap=True)


def _verdict_line(result: RunResult) -> None:
    summary = result.summary
    if summary is None:
        return
    console.print(Text("PREDICTED", style="bold magenta") + Text(
        f" verdict {summary.verdict.upper()} (exit code {summary.exit_code}) on profile "
        f"{summary.prediction.profile.name if summary.prediction else '?'}: a prediction from the simulator's "
        "model, to be confirmed on the hardware with `harness run`"), highlight=False, soft_wrap=True)


def predict_command(
    scenario: Annotated[Path, typer.Argument(help="scenario YAML file (any engine: vllm, trtllm or sim)",
                                             show_default=False)],
    profile: Annotated[str | None, typer.Option("--profile", help="simulator hardware profile (`harness sim "
                                                "profiles` lists them)", show_default=False)] = None,
    profile_file: Annotated[Path | None, typer.Option("--profile-file", help="a profile YAML file instead of a "
                                                      "built-in profile", show_default=False)] = None,
    out: Annotated[Path, typer.Option("--out", help="directory that receives results/<run-id>/")] = Path("results"),
    clock: Annotated[str, typer.Option("--clock", help="virtual: in seconds, no sleeping (default); real: the "
                                       "simulator as a server in real time")] = "virtual",
    json_out: Annotated[bool, typer.Option("--json", help="print the summary as JSON at the end")] = False,
    set_: Annotated[list[str] | None, typer.Option("--set", help="override a field of the scenario first: "
                                                   "KEY=VALUE (repeatable)")] = None,
) -> None:
    """Predict a rollout on hardware you have not rented: the scenario's arms on the simulated engine with a named
    hardware profile, ending in a PREDICTED verdict and report (profile, sources, the simulator's fidelity table).

    Exit codes: 0 go, 1 no-go, 2 refused or bad input (the field named), 3 hold, 4 the run failed, 5 slo-unmet."""
    if clock not in ("virtual", "real"):
        err_console.print(Text(f"error: --clock: {safe_text(clock)!r} is not a clock; use virtual or real"))
        raise typer.Exit(ExitCode.BAD_INPUT)
    opts = PredictOptions(profile=profile, profile_file=profile_file, out_dir=out, overrides=tuple(set_ or []),
                          clock="virtual" if clock == "virtual" else "real")
    live = LiveOutput(console, quiet=json_out)
    result, _mapped = run_prediction(scenario, opts, say=live.say,
                                     on_mapped=None if json_out else lambda m: _banner(m, opts))
    if result.exit_code == ExitCode.BAD_INPUT and result.summary is None:
        err_console.print(Text("error: ", style="bold red") + Text(safe_text(result.message, multiline=True)),
                          highlight=False, soft_wrap=True)
        raise typer.Exit(ExitCode.BAD_INPUT)
    if json_out and result.summary is not None:
        typer.echo(result.summary.model_dump_json(indent=2))
    else:
        live.finish(result)
        _verdict_line(result)
    raise typer.Exit(result.exit_code)
