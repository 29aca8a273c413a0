"""``harness run --require-validation``: a validation that cannot run stops the run with exit 2 before any server
starts, and the run directory says what was (not) validated; the report opens with it."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

from harness.report.html import render_html
from harness.report.validation import NOT_RECORDED, validation_banner
from harness.report.writers import write_reports
from harness.schema.validation import ArmValidation, ValidationRecord
from tests.support.sample import sample_summary

REPO = Path(__file__).resolve().parents[4]
NO_VLLM = 'KVH-VALIDATE {"fatal": "cannot set up vllm: ModuleNotFoundError: No module named \'vllm\'"}'


def _no_vllm(tmp_path: Path) -> str:
    path = tmp_path / "python-without-vllm"
    path.write_text(f"#!{sys.executable}\nimport sys\nsys.stdin.read()\nprint({NO_VLLM!r})\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def _run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text("{}")
    return subprocess.run([sys.executable, "-m", "harness", "run", str(REPO / "scenarios" / "vllm-cpu-smoke.yaml"),
                           "--out", str(tmp_path / "out"), "--validate-python", _no_vllm(tmp_path),
                           "--validate-model", str(model), *extra],
                          capture_output=True, text=True, timeout=120, check=False, cwd=REPO)


def test_require_validation_exits_2_before_any_server_when_the_check_cannot_run(tmp_path: Path) -> None:
    proc = _run(tmp_path, "--require-validation")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "--require-validation: 2 arm(s) could not be validated" in proc.stderr
    assert "No module named 'vllm'" in proc.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    record = json.loads((run_dir / "validation.json").read_text())
    assert record["state"] == "incomplete" and {a["status"] for a in record["arms"]} == {"not-checked"}
    logs = run_dir / "logs"
    assert not logs.exists() or not any(logs.iterdir()), "a server was started"


def test_no_validate_with_require_validation_is_refused(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "harness", "run", str(REPO / "scenarios" / "vllm-cpu-smoke.yaml"),
                           "--out", str(tmp_path / "out"), "--no-validate", "--require-validation"],
                          capture_output=True, text=True, timeout=120, check=False, cwd=REPO)
    assert proc.returncode == 2 and "contradict" in proc.stderr


def _real(validation: ValidationRecord | None):  # type: ignore[no-untyped-def]
    return sample_summary(simulated=False).model_copy(update={"engine": "vllm", "validation": validation})


def test_a_real_engine_report_without_a_validation_record_says_not_validated(tmp_path: Path) -> None:
    summary = _real(None)
    assert validation_banner(summary) == NOT_RECORDED
    html = render_html(summary)
    assert 'id="not-validated-badge">NOT VALIDATED' in html
    write_reports(summary, tmp_path, only=["md"])
    assert "> **NOT VALIDATED: this run recorded no engine validation" in (tmp_path / "summary.md").read_text()


def test_an_incomplete_validation_is_loud_and_a_complete_one_is_quiet() -> None:
    missing = ValidationRecord(state="incomplete", reason="1 of 3 arm(s) could not be checked: image absent",
                               arms=[ArmValidation(arm="cpu", status="not-checked", message="image absent",
                                                   where="image x")])
    assert validation_banner(_real(missing)) == "NOT VALIDATED: 1 of 3 arm(s) could not be checked: image absent"
    done = ValidationRecord(state="validated", arms=[ArmValidation(arm="cpu", status="ok", message="ok", where="w")])
    assert validation_banner(_real(done)) is None
    assert validation_banner(sample_summary()) is None  # simulated: the SIMULATED badge says it all
    skipped = ValidationRecord(state="skipped", reason="--no-validate: the arms were not checked")
    assert validation_banner(_real(skipped)) == "NOT VALIDATED: --no-validate: the arms were not checked"
