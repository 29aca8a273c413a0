"""``harness report`` on a run directory the harness wrote before its packages were rearranged.

``tests/fixtures/runs/demo-prelayout/`` is a ``make demo`` run (the simulated 8B: baseline, CPU tier, CPU + disk
tier, the baseline again for the A/A noise floor) made by the harness as it stood before the layout change, with its
``summary.json`` as that harness wrote it; only the rendered reports and the record parts (``requests.parquet``
holds the same rows) were left out to keep it small. Rebuilding the summary from the raw files with today's code
must give the same verdict, decisions and rule outcomes (rule, status, step): moving code is not allowed to move a
decision. The words are not compared: since issue 32 every comparison is computed on steady-state samples (MSER-5),
unpaired in closed loops, with block-bootstrap intervals, and its message names the bounds a pass and a breach need,
so the figures in the sentences moved while no decision did (checked when that change landed).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from harness.cli import app

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "demo-prelayout"


def _decisions(summary: dict[str, Any]) -> dict[str, Any]:
    return {
        "verdict": summary["verdict"],
        "recommended_arm": summary.get("recommended_arm"),
        "exit_code": summary.get("exit_code"),
        "arms": [{"name": arm["name"], "decision": arm["decision"],
                  "rules": [{k: rule.get(k) for k in ("rule", "status", "step")}
                            for rule in arm["rules"]]}
                 for arm in summary["arms"]],
    }


def test_report_rebuilds_the_same_decisions_from_a_run_made_before_the_layout(tmp_path: Path) -> None:
    run = tmp_path / FIXTURE.name
    shutil.copytree(FIXTURE, run)
    before = json.loads((FIXTURE / "summary.json").read_text())
    assert before["verdict"] == "go" and any(arm["rules"] for arm in before["arms"])  # a fixture that decides

    result = CliRunner().invoke(app, ["report", str(run)])

    assert result.exit_code == 0, result.output
    after = json.loads((run / "summary.json").read_text())
    assert _decisions(after) == _decisions(before)
    go = next(arm for arm in after["arms"] if arm["decision"] == "go")
    assert go["reasons"][0].startswith("earns-its-keep: earns its keep: "), go["reasons"]
    assert go["effects"] and any(row["deciding"] for row in go["effects"])
    for name in ("summary.md", "junit.xml", "report.html"):
        assert (run / name).stat().st_size > 0
