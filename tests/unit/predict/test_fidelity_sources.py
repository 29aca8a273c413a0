"""The fidelity table and the profiles' sources are data: the README's table is rendered from fidelity.yaml, every
built-in profile carries its sources, `harness sim profiles` lists them and a prediction's record carries both."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.config import load_scenario
from harness.predict.mapping import PredictTarget, map_scenario
from harness.predict.record import build_prediction
from harness.sim.cli import sim_app
from harness.sim.fidelity import STATUS_TEXT, load_fidelity, main, markdown_table, readme_section, with_table
from harness.sim.profile import builtin_profile_names, load_profile

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "harness" / "sim" / "README.md"
# what every shipped profile must say where it comes from: the setting, and each part with figures of its own
REQUIRED_PARTS = {"general", "model", "compute", "link", "disk", "scheduler"}


def test_the_readme_table_is_the_data() -> None:
    assert readme_section(README.read_text(encoding="utf-8")) == markdown_table(), (
        "harness/sim/README.md's fidelity table differs from harness/sim/fidelity.yaml: edit the YAML, then run "
        "python -m harness.sim.fidelity --write")
    assert main(["--check"]) == 0


def test_a_readme_that_drifted_from_the_data_is_caught() -> None:
    rows = load_fidelity()
    drifted = with_table(README.read_text(encoding="utf-8"), [rows[0].model_copy(update={"status": "modelled"}),
                                                              *rows[1:]])
    assert readme_section(drifted) != markdown_table()
    with pytest.raises(ValueError, match="fidelity markers"):
        readme_section("# no table here")


def test_every_status_is_used_and_said_in_words() -> None:
    rows = load_fidelity()
    assert {r.status for r in rows} == set(STATUS_TEXT)  # something of each kind: code, published, modelled only
    table = markdown_table(rows)
    for row in rows:
        assert f"| {row.status_text} |" in table.splitlines()[rows.index(row) + 2]
    assert "checked against vLLM's code" in table and "modelled only" in table


@pytest.mark.parametrize("name", builtin_profile_names())
def test_every_builtin_profile_names_its_sources(name: str) -> None:
    profile = load_profile(name)
    parts = [s.part for s in profile.sources]
    assert set(parts) >= REQUIRED_PARTS, f"profile {name} lacks sources for {REQUIRED_PARTS - set(parts)}"
    assert all(len(s.text) > 40 for s in profile.sources)
    assert parts[0] == "general"


def test_sim_profiles_lists_models_and_sources() -> None:
    plain = CliRunner().invoke(sim_app, ["profiles"])
    full = CliRunner().invoke(sim_app, ["profiles", "--sources"])
    assert plain.exit_code == full.exit_code == 0
    for name in builtin_profile_names():
        p = load_profile(name)
        assert f"{name}: {p.description}" in plain.stdout
        assert f"model {p.model.name} on {p.gpu.name}; sources: general" in plain.stdout
        for note in p.sources:
            assert f"[{note.part}] {note.text.splitlines()[0]}" in full.stdout
    assert len(full.stdout) > 4 * len(plain.stdout)


def test_the_prediction_record_carries_the_sources_and_the_table(tmp_path: Path) -> None:
    source = load_scenario(ROOT / "scenarios" / "vllm-tiered.yaml", [])
    target = PredictTarget(load_profile("h100-llama3-8b"), "h100-llama3-8b", "virtual", tmp_path)
    record = build_prediction(source, map_scenario(source, target), target)
    assert record.marking == "PREDICTED" and record.profile.name == "h100-llama3-8b"
    assert [(s.part, s.text) for s in record.profile.sources] == [
        (s.part, s.text) for s in load_profile("h100-llama3-8b").sources]
    assert [r.part for r in record.fidelity] == [r.part for r in load_fidelity()]
    assert record.profile.gpu_kv_blocks == 27763 and record.profile.block_size == 16  # the README's figure
    assert (record.scenario, record.engine, record.model) == ("vllm-tiered", "vllm",
                                                              "meta-llama/Llama-3.1-8B-Instruct")
