"""`harness predict` end to end on the virtual clock with tiny steps: the vLLM tiered scenario mapped onto the
h100-llama3-8b profile runs, exits with its verdict's code, and every report says PREDICTED; `harness report`
rebuilds it still PREDICTED; the user's NVMe path is never created and the prediction's temporary directory is gone."""

from __future__ import annotations

import json
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

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


def test_predict_vllm_tiered_on_h100(tmp_path: Path) -> None:
    had_tier, temps = USER_TIER.exists(), _temp_dirs()
    args = ["predict", str(ROOT / "scenarios" / "vllm-tiered.yaml"), "--profile", "h100-llama3-8b", "--out",
            str(tmp_path)]
    for item in TINY:
        args += ["--set", item]
    started = time.monotonic()
    result = CliRunner().invoke(app, args)
    wall = time.monotonic() - started
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
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
    assert (run_dir / "summary.md").read_text(encoding="utf-8").startswith("## PREDICTED · SIMULATED")
    assert 'id="predicted-badge"' in (run_dir / "report.html").read_text(encoding="utf-8")
    props = {p.get("name"): p.get("value") for p in ET.parse(run_dir / "junit.xml").iter("property")}
    assert props["predicted"] == "true" and props["profile"] == "h100-llama3-8b"
    assert USER_TIER.exists() == had_tier  # the user's NVMe path was never touched
    assert _temp_dirs() <= temps  # the prediction's tier and scenario directory is removed

    (run_dir / "summary.json").unlink()
    rebuilt = CliRunner().invoke(app, ["report", str(run_dir)])
    assert rebuilt.exit_code == 0, rebuilt.output
    again = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert again["prediction"] == pred and again["verdict"] == summary["verdict"]
