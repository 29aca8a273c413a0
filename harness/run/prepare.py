"""A run's directory before its first arm: a new one (the scenario as resolved, the manifest, a prediction's record),
or the one ``--resume`` continues (its recorded scenario and manifest, and what its journals say is already done; a
prediction's record that cannot be read stops the resume before anything runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.config import Scenario, load_scenario
from harness.config.loader import scenario_hash
from harness.core.atomic import write_json_atomic
from harness.run.manifest import new_manifest
from harness.run.options import BadRunInput, RunOptions
from harness.run.scenario_record import load_recorded_scenario, recorded_scenario_yaml, resolve_flag_references
from harness.rundir import journal
from harness.rundir.layout import RunDir, new_run_id
from harness.rundir.prediction import PredictionFileError, read_prediction, write_prediction
from harness.rundir.resume import finished_arms
from harness.virtual.checks import virtual_refusals


def completed_state(run: RunDir) -> tuple[set[str], dict[str, int]]:
    """Arms finished (completed, or failed because of the server) and completed step counts of unfinished arms,
    from the journals (an arm the harness's own failure stopped is not finished: it is redone)."""
    finished = finished_arms(journal.read_arm_events(run, strict=False))
    steps: dict[str, int] = {}
    for e in journal.read_step_entries(run, strict=False):
        if e.measured and not e.partial:
            steps[e.arm] = max(steps.get(e.arm, 0), e.step + 1)
    return finished, steps


def _overrides(scenario_path: Path, opts: RunOptions) -> tuple[str, ...]:
    """The ``--set`` overrides, and ``engine.sim_clock=virtual`` for ``--virtual`` (a simulated engine only)."""
    if not opts.virtual:
        return opts.overrides
    engine = load_scenario(scenario_path, opts.overrides).engine
    if engine.kind != "sim":
        raise BadRunInput(f"--virtual runs the simulated engine on a virtual clock; {scenario_path} has engine.kind: "
                          f"{engine.kind} (`harness predict` maps a scenario onto the simulator)")
    return (*opts.overrides, "engine.sim_clock=virtual")


def _check_resumable_prediction(run: RunDir, scenario: Scenario) -> None:
    """A prediction resumes (and stays PREDICTED: :func:`harness.run.orchestrator.finish` marks it from its record)
    unless its record cannot be read, or it ran on the real clock with a disk tier: that tier lived in the temporary
    directory ``harness predict`` removed (on the virtual clock the disk tier is in memory, no directory is used)."""
    try:
        prediction = read_prediction(run.root)
    except PredictionFileError as exc:
        raise BadRunInput(f"{exc}; the run is a prediction (harness predict) whose record cannot be read: "
                          "restore prediction.json, or predict again") from None
    if prediction is None or prediction.clock != "real":
        return
    tiers = [t.root_dir for arm in scenario.arms for t in arm.fs_tiers()]
    if tiers:
        raise BadRunInput(f"{run.root}: a prediction on the real clock cannot be resumed: its disk tier ({tiers[0]}) "
                          "was in the temporary directory `harness predict` removed when it ended; predict again "
                          "(`harness predict` runs on the virtual clock by default, whose predictions resume)")


def prepare_run(scenario_path: Path | None, opts: RunOptions) -> tuple[Scenario, RunDir, str, dict[str, Any]]:
    if opts.resume is not None:
        if opts.virtual:
            raise BadRunInput("--virtual with --resume: a resumed run keeps the clock it was started on (its "
                              "scenario.yaml's engine.sim_clock); drop --virtual")
        run = RunDir(opts.resume)
        if not run.scenario.is_file() or not run.manifest.is_file():
            raise BadRunInput(f"{opts.resume}: not a run directory (scenario.yaml and manifest.json expected)")
        scenario = load_recorded_scenario(run.scenario)  # secrets by name: they must be in the environment
        _check_resumable_prediction(run, scenario)
        manifest = json.loads(run.manifest.read_text(encoding="utf-8"))
        return scenario, run, str(manifest["run_id"]), manifest
    assert scenario_path is not None
    scenario = resolve_flag_references(load_scenario(scenario_path, _overrides(scenario_path, opts)))
    if scenario.engine.sim_clock == "virtual":
        refused = virtual_refusals(scenario)
        if refused:
            raise BadRunInput("the virtual clock cannot run this scenario:\n" + "\n".join(f"  {p}" for p in refused))
    if opts.only:
        unknown = [n for n in opts.only if n not in {a.name for a in scenario.arms}]
        if unknown:
            raise BadRunInput(f"--only: no arm named {', '.join(unknown)}; arms: "
                              f"{', '.join(a.name for a in scenario.arms)}")
    run_id = new_run_id(scenario.name)
    run = RunDir(opts.out_dir / run_id).create()
    run.scenario.write_text(recorded_scenario_yaml(scenario), encoding="utf-8")  # secrets by name
    if opts.prediction is not None:  # before any arm: an interrupted prediction is still marked as one
        write_prediction(run.root, opts.prediction)
    manifest = new_manifest(run_id, scenario, scenario_hash(scenario), str(scenario_path))
    manifest["only"] = opts.only
    write_json_atomic(run.manifest, manifest)
    return scenario, run, run_id, manifest
