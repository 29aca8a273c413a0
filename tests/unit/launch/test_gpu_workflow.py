"""The scheduled GPU benchmark workflow (.github/workflows/gpu-benchmark.yml): triggers, runner, steps, verdict gate,
and (where shellcheck is installed) its shell steps."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
WORKFLOW = REPO / ".github" / "workflows" / "gpu-benchmark.yml"


def workflow() -> dict[Any, Any]:
    doc = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(doc, dict)
    return doc


def steps() -> list[dict[str, Any]]:
    job = workflow()["jobs"]["benchmark"]
    result: list[dict[str, Any]] = job["steps"]
    return result


def test_triggers_and_runner() -> None:
    doc = workflow()
    on = doc[True]  # YAML 1.1 reads the key `on` as True
    assert re.fullmatch(r"[0-9*/,-]+( [0-9*/,-]+){4}", on["schedule"][0]["cron"])
    assert "workflow_dispatch" in on
    job = doc["jobs"]["benchmark"]
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    assert doc["concurrency"]["cancel-in-progress"] is False
    assert doc["permissions"] == {"contents": "read"}
    assert job["env"]["HF_TOKEN"] == "${{ secrets.HF_TOKEN }}"


def test_steps_benchmark_upload_summary_and_gate() -> None:
    runs = "\n".join(s.get("run", "") for s in steps())
    assert "harness gpu-check" in runs
    assert "make benchmark" in runs
    assert "harness index" in runs
    assert "GITHUB_STEP_SUMMARY" in runs and "summary.md" in runs
    assert "harness cleanup" in runs
    upload = next(s for s in steps() if str(s.get("uses", "")).startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()"
    gate = steps()[-1]
    assert gate["name"] == "Verdict gate"
    assert re.search(r"1\) .*exit 1", gate["run"]), "no-go must fail the job"
    assert re.search(r"0\) echo", gate["run"])
    always = [s["name"] for s in steps() if s.get("if") == "always()"]
    assert {"Results index (history of every run on this runner)", "Job summary", "Upload results",
            "Remove leftover servers and containers"} <= set(always)


def test_job_summary_carries_the_drift_report() -> None:
    """`harness index` writes drift.md next to index.html; the job summary appends it, and the artifact keeps it."""
    index_step = next(s for s in steps() if s["name"].startswith("Results index"))
    assert 'harness index "$RESULTS"' in index_step["run"]
    summary = next(s for s in steps() if s["name"] == "Job summary")
    assert re.search(r'cat "\$RESULTS/drift\.md"; \} >> "\$GITHUB_STEP_SUMMARY"', summary["run"])
    assert 'if [ -f "$RESULTS/drift.md" ]' in summary["run"]  # a missing file is said, not an error
    names = [s["name"] for s in steps()]
    assert names.index("Results index (history of every run on this runner)") < names.index("Job summary")
    collect = next(s for s in steps() if s["name"] == "Collect artifacts")
    assert "drift.md" in collect["run"]
    gate = steps()[-1]["run"]
    assert "drift" not in gate  # drift informs; only the verdict fails the job


def test_shell_steps_pass_shellcheck(tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed")
    for i, step in enumerate(steps()):
        if "run" not in step:
            continue
        script = re.sub(r"\$\{\{[^}]*\}\}", "placeholder", step["run"])
        path = tmp_path / f"step{i}.sh"
        path.write_text("#!/usr/bin/env bash\nset -eo pipefail\n" + script)
        proc = subprocess.run([shellcheck, "-S", "warning", str(path)], capture_output=True, text=True, timeout=60,
                              check=False)
        assert proc.returncode == 0, f"step {step.get('name')}: {proc.stdout}"
