"""`harness predict` end to end on the virtual clock with tiny steps: the vLLM tiered scenario mapped onto the
h100-llama3-8b profile runs, exits with its verdict's code, and every report says PREDICTED; `harness report`
rebuilds it still PREDICTED; the user's NVMe path is never created and the prediction's temporary directory is gone.
The prediction stays PREDICTED when it is interrupted and resumed (`harness run --resume`), when a finished one is
resumed, and when `harness report --from-summary` renders a summary.json that lost the marking; a resume whose
prediction record is damaged, or of a real-clock prediction whose disk tier was in the removed temporary directory,
is refused (exit 2, saying why) before anything runs."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.predict.run import TEMP_PREFIX

ROOT = Path(__file__).resolve().parents[3]
TINY = ["steps.warmup.duration_s=2", "steps.levels[0].duration_s=4", "steps.levels[1].duration_s=4",
        "steps.levels[2].duration_s=4", *(f"drills[{i}].{p}_s=2" for i in (0, 1) for p in ("before", "during",
                                                                                           "after"))]
USER_TIER = Path("/mnt/nvme/kv-tier")  # vllm-tiered.yaml's root_dir


def _temp_dirs() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob(f"{TEMP_PREFIX}*"))


@pytest.fixture(scope="module")
def predicted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, float, bool, set[Path]]:
    """One tiny prediction: its run directory, the CLI's result, its wall time, and what was on disk before."""
    out = tmp_path_factory.mktemp("predicted")
    had_tier, temps = USER_TIER.exists(), _temp_dirs()
    args = ["predict", str(ROOT / "scenarios" / "vllm-tiered.yaml"), "--profile", "h100-llama3-8b", "--out", str(out)]
    for item in TINY:
        args += ["--set", item]
    started = time.monotonic()
    result = CliRunner().invoke(app, args)
    wall = time.monotonic() - started
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir, result, wall, had_tier, temps


def _copy(run_dir: Path, dest: Path) -> Path:
    shutil.copytree(run_dir, dest)
    return dest


def _summary(run_dir: Path) -> dict[str, Any]:
    return dict(json.loads((run_dir / "summary.json").read_text(encoding="utf-8")))


def _interrupt_last_arm(run_dir: Path) -> str:
    """The journals as an interruption in the last arm's last step leaves them: that step and the arm's end gone."""
    arms = [json.loads(line) for line in (run_dir / "arms.jsonl").read_text(encoding="utf-8").splitlines() if line]
    last = arms[-1]["arm"]
    kept = [e for e in arms if not (e["arm"] == last and e["event"] == "completed")]
    kept.append({"arm": last, "at": kept[-1]["at"], "event": "interrupted"})
    (run_dir / "arms.jsonl").write_text("".join(json.dumps(e) + "\n" for e in kept), encoding="utf-8")
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text(encoding="utf-8").splitlines() if line]
    top = max(e["step"] for e in steps if e["arm"] == last)
    (run_dir / "steps.jsonl").write_text("".join(json.dumps(e) + "\n" for e in steps
                                                 if not (e["arm"] == last and e["step"] == top)), encoding="utf-8")
    for name in ("summary.json", "summary.md", "junit.xml", "report.html"):
        (run_dir / name).unlink()
    return str(last)


def _marked(run_dir: Path, pred: dict[str, Any]) -> None:
    again = _summary(run_dir)
    assert again["prediction"] == pred and again["simulated"] is True
    assert (run_dir / "summary.md").read_text(encoding="utf-8").startswith("**PREDICTED · SIMULATED · ")
    assert 'id="predicted-badge"' in (run_dir / "report.html").read_text(encoding="utf-8")
    props = {p.get("name"): p.get("value") for p in ET.parse(run_dir / "junit.xml").iter("property")}
    assert props["predicted"] == "true" and props["profile"] == "h100-llama3-8b"


def test_predict_vllm_tiered_on_h100(predicted: tuple[Path, Any, float, bool, set[Path]]) -> None:
    run_dir, result, wall, had_tier, temps = predicted
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    print(f"\nharness predict (tiny steps, virtual clock): {wall:.1f} s wall, verdict {summary['verdict']}")
    assert result.exit_code == summary["exit_code"] and summary["exit_code"] in (0, 1, 3, 5), result.output
    assert "PREDICTED verdict" in result.stdout and "PREDICTED · SIMULATED" in result.stdout
    assert summary["simulated"] is True and summary["scenario"] == "vllm-tiered-predicted"
    pred = summary["prediction"]
    assert pred["marking"] == "PREDICTED" and pred["profile"]["name"] == "h100-llama3-8b"
    assert pred["clock"] == "virtual" and pred["engine"] == "vllm" and pred["profile"]["sources"]
    assert json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))["clock"] == "virtual"
    assert [a["name"] for a in summary["arms"]] == ["baseline", "cpu-32g", "cpu-32g-nvme"]
    assert all(s["requests"] > 0 for a in summary["arms"] for s in a["steps"])
    assert (run_dir / "prediction.json").is_file()
    assert (run_dir / "summary.md").read_text(encoding="utf-8").startswith("**PREDICTED · SIMULATED · ")
    assert 'id="predicted-badge"' in (run_dir / "report.html").read_text(encoding="utf-8")
    props = {p.get("name"): p.get("value") for p in ET.parse(run_dir / "junit.xml").iter("property")}
    assert props["predicted"] == "true" and props["profile"] == "h100-llama3-8b"
    assert USER_TIER.exists() == had_tier  # the user's NVMe path was never touched
    assert _temp_dirs() <= temps  # the prediction's tier and scenario directory is removed


def test_harness_report_rebuilds_it_still_predicted(predicted: tuple[Path, Any, float, bool, set[Path]],
                                                   tmp_path: Path) -> None:
    run_dir = _copy(predicted[0], tmp_path / "run")
    summary = _summary(run_dir)
    (run_dir / "summary.json").unlink()
    rebuilt = CliRunner().invoke(app, ["report", str(run_dir)])
    assert rebuilt.exit_code == 0, rebuilt.output
    _marked(run_dir, summary["prediction"])
    assert _summary(run_dir)["verdict"] == summary["verdict"]


def test_report_from_summary_restores_the_marking_from_the_record(
        predicted: tuple[Path, Any, float, bool, set[Path]], tmp_path: Path) -> None:
    run_dir = _copy(predicted[0], tmp_path / "run")
    summary = _summary(run_dir)
    (run_dir / "summary.json").write_text(json.dumps({**summary, "prediction": None}), encoding="utf-8")
    rendered = CliRunner().invoke(app, ["report", str(run_dir), "--from-summary"])
    assert rendered.exit_code == 0, rendered.output
    _marked(run_dir, summary["prediction"])


def test_an_interrupted_prediction_resumed_stays_predicted(predicted: tuple[Path, Any, float, bool, set[Path]],
                                                           tmp_path: Path) -> None:
    run_dir = _copy(predicted[0], tmp_path / "run")
    pred = _summary(run_dir)["prediction"]
    last = _interrupt_last_arm(run_dir)
    resumed = CliRunner().invoke(app, ["run", "--resume", str(run_dir)])
    assert resumed.exit_code in (0, 1, 3, 5), resumed.output
    assert "resuming a PREDICTED run: profile h100-llama3-8b on the virtual clock" in resumed.stdout
    assert "PREDICTED · SIMULATED (virtual clock)" in resumed.stdout
    _marked(run_dir, pred)
    assert [a["name"] for a in _summary(run_dir)["arms"]][-1] == last
    assert _summary(run_dir)["exit_code"] == resumed.exit_code


def test_a_finished_prediction_resumed_stays_predicted(predicted: tuple[Path, Any, float, bool, set[Path]],
                                                       tmp_path: Path) -> None:
    run_dir = _copy(predicted[0], tmp_path / "run")
    summary = _summary(run_dir)
    resumed = CliRunner().invoke(app, ["run", "--resume", str(run_dir)])
    assert resumed.exit_code == summary["exit_code"], resumed.output
    _marked(run_dir, summary["prediction"])


def test_a_resume_with_a_damaged_record_is_refused(predicted: tuple[Path, Any, float, bool, set[Path]],
                                                   tmp_path: Path) -> None:
    run_dir = _copy(predicted[0], tmp_path / "run")
    steps = (run_dir / "steps.jsonl").read_text(encoding="utf-8")
    (run_dir / "prediction.json").write_text('{"marking": "PREDICTED"}', encoding="utf-8")
    refused = CliRunner().invoke(app, ["run", "--resume", str(run_dir)])
    assert refused.exit_code == 2, refused.output
    assert "prediction.json: not a prediction record" in refused.output and "Traceback" not in refused.output
    assert (run_dir / "steps.jsonl").read_text(encoding="utf-8") == steps  # nothing ran


def test_a_real_clock_prediction_with_a_disk_tier_is_not_resumed(
        predicted: tuple[Path, Any, float, bool, set[Path]], tmp_path: Path) -> None:
    run_dir = _copy(predicted[0], tmp_path / "run")
    record = json.loads((run_dir / "prediction.json").read_text(encoding="utf-8"))
    (run_dir / "prediction.json").write_text(json.dumps({**record, "clock": "real"}), encoding="utf-8")
    _interrupt_last_arm(run_dir)
    steps = (run_dir / "steps.jsonl").read_text(encoding="utf-8")
    refused = CliRunner().invoke(app, ["run", "--resume", str(run_dir)])
    assert refused.exit_code == 2, refused.output
    said = " ".join(refused.output.split())
    assert "a prediction on the real clock cannot be resumed" in said and "predict again" in said
    assert (run_dir / "steps.jsonl").read_text(encoding="utf-8") == steps and not _temp_dirs() - predicted[4]
