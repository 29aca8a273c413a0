"""A prediction's summary is marked PREDICTED and SIMULATED in every report, with the profile, its sources and the
fidelity table in the header; the record survives the run directory (prediction.json) for `harness report`."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness.config import load_scenario
from harness.predict.mapping import PredictTarget, map_scenario
from harness.predict.record import build_prediction
from harness.report.html import render_html
from harness.report.junit import render_junit
from harness.report.markdown import render_markdown
from harness.report.writers import summary_json_text
from harness.run.options import RunOptions
from harness.run.prepare import prepare_run
from harness.rundir.layout import PREDICTION as PREDICTION_FILE
from harness.rundir.prediction import (
    PredictionFileError,
    attach_from_run,
    read_prediction,
    with_prediction,
    write_prediction,
)
from harness.schema.prediction import Prediction
from harness.schema.summary import Summary
from harness.sim.profile import load_profile
from tests.support.sample import sample_summary

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def prediction(tmp_path_factory: pytest.TempPathFactory) -> Prediction:
    source = load_scenario(ROOT / "scenarios" / "vllm-tiered.yaml", ["engine.model=meta-llama/Llama-3.1-8B-FP8"])
    target = PredictTarget(load_profile("h100-llama3-8b"), "h100-llama3-8b", "virtual",
                           tmp_path_factory.mktemp("tiers"))
    return build_prediction(source, map_scenario(source, target), target)


@pytest.fixture(scope="module")
def predicted(prediction: Prediction) -> Summary:
    return with_prediction(sample_summary(), prediction)


def test_summary_json_carries_the_prediction(predicted: Summary, prediction: Prediction) -> None:
    data = json.loads(summary_json_text(predicted))
    assert data["simulated"] is True and data["prediction"]["marking"] == "PREDICTED"
    assert data["prediction"]["profile"]["name"] == "h100-llama3-8b"
    assert Summary.model_validate(data).prediction == prediction
    (warning,) = prediction.warnings  # an FP8 model on the bf16 profile: said loudly
    assert data["warnings"][0] == f"PREDICTED: {warning}"
    assert json.loads(summary_json_text(sample_summary()))["prediction"] is None  # a measured run has none


def test_markdown_is_marked_and_names_profile_sources_and_fidelity(predicted: Summary, prediction: Prediction) -> None:
    text = render_markdown(predicted)
    assert text.splitlines()[0].startswith("**PREDICTED · SIMULATED · GO")
    assert "**PREDICTED · SIMULATED** on simulator profile **h100-llama3-8b**" in text
    assert "PREDICTION WARNING" in text and "27,763 GPU KV blocks" in text
    assert "checked against vLLM's code" in text and "checked against published figures" in text
    assert "modelled only" in text and "The profile's sources (7 notes)" in text
    compact = render_markdown(predicted, max_chars=2000)
    assert compact.startswith("**PREDICTED · SIMULATED · ")
    plain = render_markdown(sample_summary())
    assert "PREDICTED" not in plain and plain.startswith("**SIMULATED · GO")


def test_junit_is_marked_with_properties_and_a_prediction_case(predicted: Summary) -> None:
    root = ET.fromstring(render_junit(predicted))
    assert root.get("name", "").startswith("[PREDICTED] [SIMULATED] kvoffload-harness")
    run = root.find("testsuite[@name='run']")
    assert run is not None
    props = {p.get("name"): p.get("value") for p in run.findall("properties/property")}
    assert props["predicted"] == "true" and props["profile"] == "h100-llama3-8b" and props["simulated"] == "true"
    (case,) = [c for c in run.findall("testcase") if c.get("classname") == "run.prediction"]
    out = case.findtext("system-out") or ""
    assert "PREDICTED (SIMULATED) on profile h100-llama3-8b" in out and "[compute] " in out
    assert "modelled only" in out and "warning: engine.model" in out
    assert "predicted" not in {p.get("name") for p in ET.fromstring(render_junit(sample_summary())).iter("property")}


def test_html_banner_and_header(predicted: Summary, prediction: Prediction) -> None:
    page = render_html(predicted)
    assert "<title>[PREDICTED] [SIMULATED] " in page and 'id="predicted-badge"' in page
    assert "<h1>PREDICTED · GO" in page and 'id="simulated-badge"' in page
    assert 'id="prediction"' in page and 'href="#prediction"' in page
    assert 'id="prediction-sources"' in page and 'id="prediction-fidelity"' in page
    first_source = prediction.profile.sources[0].text.splitlines()[0]
    assert first_source.split("(")[0].strip() in page
    for row in prediction.fidelity:
        assert row.status_text.replace("'", "&#39;") in page
    assert 'id="prediction-warnings"' in page
    assert "PREDICTED" not in render_html(sample_summary())


def test_the_record_round_trips_through_the_run_directory(tmp_path: Path, prediction: Prediction) -> None:
    assert read_prediction(tmp_path) is None and attach_from_run(tmp_path, sample_summary()).prediction is None
    write_prediction(tmp_path, prediction)
    assert read_prediction(tmp_path) == prediction
    again = attach_from_run(tmp_path, attach_from_run(tmp_path, sample_summary()))
    assert again.prediction == prediction
    assert sum(w.startswith("PREDICTED: ") for w in again.warnings) == 1  # said once, however often attached


def test_the_record_is_in_a_new_run_directory_before_any_arm(tmp_path: Path, prediction: Prediction) -> None:
    _scenario, run, _run_id, _manifest = prepare_run(ROOT / "scenarios" / "demo-sim.yaml",
                                                     RunOptions(out_dir=tmp_path, prediction=prediction))
    assert read_prediction(run.root) == prediction and not run.arms.exists()  # an interrupted prediction is one
    _scenario, plain, _run_id, _manifest = prepare_run(ROOT / "scenarios" / "demo-sim.yaml",
                                                       RunOptions(out_dir=tmp_path))
    assert read_prediction(plain.root) is None


def test_a_damaged_record_is_bad_input(tmp_path: Path) -> None:
    (tmp_path / PREDICTION_FILE).write_text('{"marking": "PREDICTED"}', encoding="utf-8")
    with pytest.raises(PredictionFileError, match="not a prediction record"):
        read_prediction(tmp_path)
    (tmp_path / PREDICTION_FILE).write_text("{", encoding="utf-8")
    with pytest.raises(PredictionFileError):
        read_prediction(tmp_path)
