"""Run a prediction: load the user's scenario, map it onto the profile (:mod:`.mapping`), run the mapped scenario
through the same conductor as ``harness run``, then mark the summary and every report PREDICTED (:mod:`.record`).

The fs tiers and the mapped scenario file live in one temporary directory this module creates (``harness-predict-``)
and removes when the run ends; the run directory goes to ``--out`` like any run's, with ``prediction.json`` beside
the summary. The exit code is the verdict's (0 go, 1 no-go, 3 hold, 5 slo-unmet), 2 for a refusal or bad input, 4
for a run that failed.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness.config import Scenario, ScenarioError, load_scenario
from harness.predict.mapping import Clock, Mapped, PredictTarget, map_scenario
from harness.predict.record import build_prediction, with_prediction, write_prediction
from harness.predict.refusal import PredictRefused
from harness.report.writers import render_run
from harness.run.options import RunOptions, RunResult
from harness.run.orchestrator import run_rollout
from harness.sim.profile import ProfileError, builtin_profile_names, load_profile

EXIT_BAD_INPUT = 2
TEMP_PREFIX = "harness-predict-"
MAPPED_SCENARIO = "scenario-predicted.yaml"


@dataclass(frozen=True)
class PredictOptions:
    """What ``harness predict`` is asked."""

    profile: str | None = None
    profile_file: Path | None = None
    out_dir: Path = Path("results")
    overrides: tuple[str, ...] = ()
    clock: Clock = "virtual"


def _target(opts: PredictOptions, tier_root: Path) -> PredictTarget:
    if (opts.profile is None) == (opts.profile_file is None):
        raise PredictRefused("--profile", "give a profile name (`harness sim profiles` lists them: "
                             f"{', '.join(builtin_profile_names())}) or --profile-file PATH, not both")
    try:
        if opts.profile_file is not None:
            path = opts.profile_file.resolve()
            return PredictTarget(profile=load_profile(path=path), profile_name=path.stem, clock=opts.clock,
                                 tier_root=tier_root, profile_file=path)
        assert opts.profile is not None
        return PredictTarget(profile=load_profile(opts.profile), profile_name=opts.profile, clock=opts.clock,
                             tier_root=tier_root)
    except ProfileError as exc:
        raise PredictRefused("--profile-file" if opts.profile_file else "--profile", str(exc)) from None


def prepare(scenario_path: Path, opts: PredictOptions, tier_root: Path) -> tuple[Scenario, Mapped, PredictTarget]:
    """The user's scenario, and it mapped (ScenarioError / PredictRefused for bad input)."""
    source = load_scenario(scenario_path, opts.overrides)
    target = _target(opts, tier_root)
    return source, map_scenario(source, target), target


def mapped_yaml(mapped: Mapped) -> str:
    """The mapped scenario as the YAML the conductor loads (the fields as the user and the mapping set them)."""
    return yaml.safe_dump(mapped.scenario.model_dump(mode="json", exclude_unset=True), sort_keys=False)


def run_prediction(scenario_path: Path, opts: PredictOptions, *, say: Callable[[str], None] = print,
                   on_mapped: Callable[[Mapped], None] | None = None) -> tuple[RunResult, Mapped | None]:
    """Predict; never raises for bad input (exit 2 with the field named in the message). ``on_mapped`` is told the
    mapping before the run starts (the command's banner)."""
    work = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX))
    try:
        try:
            source, mapped, target = prepare(scenario_path, opts, work / "tiers")
        except (ScenarioError, PredictRefused) as exc:
            return RunResult(None, EXIT_BAD_INPUT, message=str(exc)), None
        prediction = build_prediction(source, mapped, target)
        if on_mapped is not None:
            on_mapped(mapped)
        path = work / MAPPED_SCENARIO
        path.write_text(mapped_yaml(mapped), encoding="utf-8")
        result = run_rollout(path, RunOptions(out_dir=opts.out_dir, write_reports=False, validate=None), say=say)
        if result.run_dir is not None and result.run_dir.is_dir():
            write_prediction(result.run_dir, prediction)
        if result.summary is None or result.run_dir is None:
            return result, mapped
        summary = with_prediction(result.summary, prediction)
        render_run(result.run_dir, summary)
        _refresh_index(result.run_dir.parent, say)
        return RunResult(result.run_dir, summary.exit_code, summary=summary, checks=result.checks,
                         message=f"PREDICTED verdict {summary.verdict}: {summary.verdict_reason}"), mapped
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _refresh_index(results_dir: Path, say: Callable[[str], None]) -> None:
    from harness.report.index import refresh_index  # as the conductor does after a run

    problem = refresh_index(results_dir)
    if problem is not None:
        say(f"warning: {problem}")
