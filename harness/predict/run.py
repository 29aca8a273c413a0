"""Run a prediction: load the user's scenario, map it onto the profile (:mod:`.mapping`), and run the mapped scenario
through the same conductor as ``harness run`` with the prediction's record (:mod:`.record`), which the conductor
keeps in the run directory as ``prediction.json`` before the first arm and attaches to every summary it builds, so
the summary and every report are marked PREDICTED (:mod:`harness.rundir.prediction`), also after an interruption and
``harness run --resume``, and in ``harness report``.

The fs tiers and the mapped scenario file live in one temporary directory this module creates (``harness-predict-``)
and removes when the run ends; the run directory goes to ``--out`` like any run's. The exit code is the verdict's
(0 go, 1 no-go, 3 hold, 5 slo-unmet), 2 for a refusal or bad input, 4 for a run that failed.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness.config import Scenario, ScenarioError, load_scenario
from harness.core.exit_codes import ExitCode
from harness.predict.mapping import Clock, Mapped, PredictTarget, map_scenario
from harness.predict.record import build_prediction
from harness.predict.refusal import PredictRefused
from harness.run.options import RunOptions, RunResult
from harness.run.orchestrator import run_rollout
from harness.sim.profile import ProfileError, builtin_profile_names, load_profile

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
            return RunResult(None, ExitCode.BAD_INPUT, message=str(exc)), None
        prediction = build_prediction(source, mapped, target)
        if on_mapped is not None:
            on_mapped(mapped)
        path = work / MAPPED_SCENARIO
        path.write_text(mapped_yaml(mapped), encoding="utf-8")
        run_opts = RunOptions(out_dir=opts.out_dir, validate=None, prediction=prediction)
        return run_rollout(path, run_opts, say=say), mapped
    finally:
        shutil.rmtree(work, ignore_errors=True)

