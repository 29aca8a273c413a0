"""``harness run --virtual``: refused (exit 2, a clear message) where the virtual clock has no meaning."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.run.options import RunOptions
from harness.run.orchestrator import run_rollout

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"


@pytest.mark.parametrize("scenario", ["vllm-tiered.yaml", "trtllm-host.yaml"])
def test_virtual_is_refused_on_a_real_engine(scenario: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["run", str(SCENARIOS / scenario), "--virtual", "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "--virtual runs the simulated engine" in result.output and "engine.kind" in result.output
    assert "Traceback" not in result.output and not list(tmp_path.iterdir())  # nothing was created


def test_virtual_with_resume_and_unmodelled_faults_are_refused(virtual_scenario: Callable[..., Path],
                                                               tmp_path: Path) -> None:
    resumed = CliRunner().invoke(app, ["run", "--resume", str(tmp_path), "--virtual"])
    assert resumed.exit_code == 2 and "keeps the clock it was started on" in resumed.output
    faulty = virtual_scenario(engine={"sim_args": ["--error-rate", "0.1"]})
    result = run_rollout(faulty, RunOptions(out_dir=tmp_path / "out", virtual=True), say=lambda _m: None)
    assert result.exit_code == 2 and "--error-rate" in result.message and "not modelled" in result.message
    remote = virtual_scenario(load={"remote_workers": 2, "master_port": 5557, "master_bind_host": "0.0.0.0"})
    result = run_rollout(remote, RunOptions(out_dir=tmp_path / "out", virtual=True), say=lambda _m: None)
    assert result.exit_code == 2 and "load.remote_workers" in result.message


def test_sim_clock_virtual_needs_a_local_process(virtual_scenario: Callable[..., Path], tmp_path: Path) -> None:
    docker = virtual_scenario(engine={"launcher": "docker", "image": "harness-sim:1.0", "sim_clock": "virtual"})
    result = run_rollout(docker, RunOptions(out_dir=tmp_path / "out"), say=lambda _m: None)
    assert result.exit_code == 2 and "sim_clock: virtual" in result.message


def test_a_drill_without_a_simulated_meaning_is_skipped_with_its_reason(virtual_scenario: Callable[..., Path],
                                                                       tmp_path: Path) -> None:
    path = virtual_scenario(steps={"warmup": {"duration_s": 0}, "levels": [{"concurrency": 2, "duration_s": 1}],
                                   "sequential": {"enabled": False}},
                            rules={"noise_floor": {"rerun_baseline": False}},
                            drills=[{"kind": "storage_pressure", "read_slowdown": 4, "before_s": 1, "during_s": 1}])
    result = run_rollout(path, RunOptions(out_dir=tmp_path / "out", virtual=True, write_reports=False),
                         say=lambda _m: None)
    assert result.summary is not None, result.message
    (drill,) = result.summary.drills
    assert drill.status == "skipped" and "no meaning on the virtual clock" in drill.message
