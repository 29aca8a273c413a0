"""``make demo``'s run ends like a demo: ``--no-verdict-exit`` exits 0 whenever the rollout ran to a verdict, while
``harness run`` keeps the verdict's code for CI; bad input still exits 2."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from typer.testing import CliRunner

from harness.cli import app
from harness.core.exit_codes import COMPLETED_ROLLOUT, verdict_exit_code

MAKEFILE = Path(__file__).resolve().parents[3] / "Makefile"
SHORT = {"steps": {"warmup": {"duration_s": 0}, "levels": [{"concurrency": 2, "duration_s": 2}],
                   "sequential": {"enabled": False}},
         "rules": {"noise_floor": {"rerun_baseline": False}}}


def _summary(out: Path) -> dict[str, object]:
    (summary,) = out.glob("*/summary.json")
    data: dict[str, object] = json.loads(summary.read_text())
    return data


def test_no_verdict_exit_is_zero_for_a_completed_rollout_and_run_keeps_the_verdicts_code(
        virtual_scenario: Callable[..., Path], tmp_path: Path) -> None:
    path = virtual_scenario(**SHORT)
    demo = CliRunner().invoke(app, ["run", str(path), "--virtual", "--no-verdict-exit", "--out", str(tmp_path / "a")])
    verdict = str(_summary(tmp_path / "a")["verdict"])
    assert verdict_exit_code(verdict) in COMPLETED_ROLLOUT, demo.output
    assert demo.exit_code == 0, demo.output
    assert f"exit {verdict_exit_code(verdict).value} for this verdict" in demo.output
    ci = CliRunner().invoke(app, ["run", str(path), "--virtual", "--out", str(tmp_path / "b")])
    assert str(_summary(tmp_path / "b")["verdict"]) == verdict  # the virtual clock is deterministic
    assert ci.exit_code == verdict_exit_code(verdict), ci.output


def test_no_verdict_exit_keeps_bad_input_at_2(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [unclosed\n")
    result = CliRunner().invoke(app, ["run", str(broken), "--no-verdict-exit", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output


def test_make_demo_runs_the_rollout_with_no_verdict_exit() -> None:
    recipe = MAKEFILE.read_text().split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    assert "scenarios/demo-sim.yaml" in recipe and "--no-verdict-exit" in recipe
