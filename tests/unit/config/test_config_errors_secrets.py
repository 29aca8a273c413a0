"""Errors about env values, command-line arguments and secret-named fields never echo the value (it may be a token)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.config import ScenarioError, load_scenario

DEMO = Path(__file__).resolve().parents[3] / "scenarios" / "demo-sim.yaml"
SECRET = "hf_zzTopSecretValue42"


def _scenario(tmp_path: Path, **engine: object) -> Path:
    data = yaml.safe_load(DEMO.read_text())
    data["engine"].update(engine)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("engine", [{"sim_args": f"--api-key {SECRET}"}, {"env": {"HF_TOKEN": [SECRET]}}])
def test_validation_errors_do_not_echo_secret_fields(tmp_path: Path, engine: dict[str, object]) -> None:
    with pytest.raises(ScenarioError) as err:
        load_scenario(_scenario(tmp_path, **engine))
    assert SECRET not in str(err.value)


@pytest.mark.parametrize("override", [f"engine.env.HF_TOKEN=[{SECRET}", f"engine.env.HF_TOKEN:{SECRET}",
                                      f"engine.extra_args=[--api-key, {SECRET}"])
def test_override_errors_do_not_echo_secret_values(tmp_path: Path, override: str) -> None:
    with pytest.raises(ScenarioError) as err:
        load_scenario(_scenario(tmp_path), [override])
    assert SECRET not in str(err.value) and "not shown" in str(err.value)


def test_override_errors_still_show_ordinary_values(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError) as err:
        load_scenario(_scenario(tmp_path), ["steps.levels=[oops"])
    assert "'[oops'" in str(err.value)
