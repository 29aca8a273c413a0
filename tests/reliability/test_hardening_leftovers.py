"""Issue 25, item 14: what an interrupted or killed run leaves, and an image reference that would be a flag.

- After SIGINT mid-step and ``--resume``, the replaced attempt's warm-up rows are marked ``superseded`` (the new
  warm-up's are not), as a replaced step's rows are.
- A harness killed with SIGKILL leaves its per-step temporary directory (``harness-step-*``: spec.json with the
  server URL, model and paths); it is ``0700`` and labelled with its harness process and run id, so ``harness
  cleanup`` lists it, leaves it alone while the run lives, and removes it with ``--all-stale`` once it is gone.
- An image reference that starts with ``-`` (``--privileged`` would become a flag of the validation's
  ``docker run``) or holds blanks or control characters is refused at scenario load: exit 2 naming engine.image.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from pydantic import ValidationError
from test_hardening_resume import _interrupt, _start
from test_reliability_signals import ENV, read_to_step

from harness.config.engine import EngineSpec
from harness.host.tempdirs import OWNER_FILE, STEP_PREFIX
from harness.run.options import RunOptions
from harness.run.orchestrator import run_rollout

CLI_TIMEOUT_S = 60
PILOT = Path(__file__).resolve().parents[2] / "scenarios" / "vllm-cpu-pilot.yaml"


pytestmark = pytest.mark.usefixtures("state_dir")  # this test's own state dir (marker ledger)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          timeout=CLI_TIMEOUT_S, check=False, env={**os.environ, **(env or {})},
                          stdin=subprocess.DEVNULL)


# --- warm-up rows of a replaced attempt -----------------------------------------------------------------------------

def test_resume_marks_the_replaced_attempts_warmup_rows_superseded(scenario: Callable[..., Path],
                                                                    tmp_path: Path) -> None:
    path = scenario("warmresume", arms=("baseline",),
                    steps={"warmup": {"duration_s": 1, "concurrency": 2},
                           "levels": [{"concurrency": 4, "duration_s": 2}]})
    out = tmp_path / "results"
    output, _pids, _took = _interrupt(_start([str(path), "--out", str(out)]), "[baseline] step 0", 1)
    run_dir = next(d for d in out.iterdir() if d.is_dir())
    assert "Traceback" not in output, output
    run_rollout(None, RunOptions(resume=run_dir, write_reports=False), say=lambda _m: None)
    rows = pq.read_table(run_dir / "requests.parquet").to_pandas()
    warm = rows[(rows["step"] == -1) & rows["drill"].isna()]
    first, second = warm[warm["attempt"] == 1], warm[warm["attempt"] == 2]
    assert len(first) > 0 and len(second) > 0, warm["attempt"].value_counts()
    assert first["superseded"].all(), "the replaced attempt's warm-up rows are marked"
    assert not second["superseded"].any(), "the warm-up that stands is not"
    measured = rows[rows["step"] == 0]
    assert measured[measured["attempt"] == 1]["superseded"].all()


# --- per-step temporary directories -----------------------------------------------------------------------------

def _step_dirs(tmp: Path) -> list[Path]:
    return sorted(p for p in tmp.iterdir() if p.name.startswith(STEP_PREFIX))


def test_step_temp_dirs_a_sigkill_leaves_are_found_and_removed_by_cleanup(scenario: Callable[..., Path],
                                                                           tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**ENV, "HARNESS_STATE_DIR": os.environ["HARNESS_STATE_DIR"], "TMPDIR": str(tmp)}
    path = scenario("killed", arms=("baseline",), steps={"levels": [{"concurrency": 2, "duration_s": 30}]})
    out = tmp_path / "results"
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", str(path), "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
                            start_new_session=True)
    try:
        seen, _url, _found = read_to_step(proc, "[baseline] step 0", 2, time.monotonic() + 90)
        dirs = _step_dirs(tmp)
        assert len(dirs) == 1, ("".join(seen), dirs)
        step = dirs[0]
        assert stat.S_IMODE(step.stat().st_mode) == 0o700
        assert (step / "spec.json").is_file()
        owner = json.loads((step / OWNER_FILE).read_text())
        run_dir = next(d for d in out.iterdir() if d.is_dir())
        assert owner["run_id"] == run_dir.name and owner["owner"].startswith(f"{proc.pid}:")

        listed = _cli("cleanup", env=env)
        assert listed.returncode == 0 and f"step temp dir {step}" in listed.stdout, listed.stdout + listed.stderr
        assert f"run {run_dir.name}: live" in listed.stdout
        spared = _cli("cleanup", "--all-stale", env=env)
        assert spared.returncode == 0 and step.is_dir(), "a live run's step directory is never removed"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    assert step.is_dir(), "SIGKILL leaves it behind"
    listed = _cli("cleanup", env=env)
    assert f"step temp dir {step}" in listed.stdout and "removable with --all-stale" in listed.stdout, listed.stdout
    removed = _cli("cleanup", "--all-stale", env=env)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    assert f"Removed step temp dir {step} of run {run_dir.name}" in removed.stdout, removed.stdout
    assert not step.exists()
    time.sleep(0.5)


# --- image references -------------------------------------------------------------------------------------------

BAD_IMAGES = {
    "flag": ("--privileged", "starts with '-'"),
    "flag-with-tag": ("-v=/:/host:v1", "starts with '-'"),
    "blank": ("vllm/vllm-openai:v0.32.0 --privileged", "no spaces or blanks"),
    "control": ("vllm/vllm-openai:v0.32.0\x1b[2K", "control character"),
}


@pytest.mark.parametrize("kind", sorted(BAD_IMAGES))
def test_an_image_reference_that_would_be_a_flag_is_refused(kind: str, tmp_path: Path) -> None:
    image, why = BAD_IMAGES[kind]
    with pytest.raises(ValidationError, match=why):
        EngineSpec(kind="vllm", launcher="docker", image=image, model="m")
    data = yaml.safe_load(PILOT.read_text())
    data["engine"]["image"] = image
    path = tmp_path / "bad-image.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    plan = _cli("plan", str(path))
    out = " ".join((plan.stdout + plan.stderr).split())
    assert plan.returncode == 2, out
    assert "Traceback" not in out and "engine.image" in out and why in out, out


def test_an_image_flag_given_by_set_is_refused_before_anything_runs(tmp_path: Path) -> None:
    run = _cli("run", str(PILOT), "--set", "engine.image=--privileged", "--out", str(tmp_path / "r"))
    out = " ".join((run.stdout + run.stderr).split())
    assert run.returncode == 2 and "engine.image" in out and "starts with '-'" in out, out
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())
