"""Security: a planted token never reaches any file of the run directory (manifest, logs copied from the server,
records, scrapes, reports); the simulator binds loopback unless told otherwise; the disk-tier path rules hold at run
time, after the pre-flight checks passed."""

from __future__ import annotations

import gzip
import json
import os
import secrets
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pyarrow.parquet as pq
import pytest
from rel_support import Progress, tiered_arm

from harness.engines import build_launch_spec
from harness.engines.spec import LaunchSpec
from harness.host.labels import DISK_TIER_MARKER
from harness.run.options import RunOptions
from harness.run.orchestrator import run_rollout
from harness.secrets.redact import MASK
from tests.support.sim import LISTEN_PREFIX, sim_command, stop_process


def _texts(path: Path) -> list[str]:
    """The file's bytes as text, plus its decompressed / decoded contents."""
    raw = path.read_bytes()
    out = [raw.decode("utf-8", "replace")]
    if path.name.endswith(".gz"):
        try:
            out.append(gzip.decompress(raw).decode("utf-8", "replace"))
        except (OSError, EOFError):
            out.append(gzip.GzipFile(fileobj=__import__("io").BytesIO(raw)).read1(10**9).decode("utf-8", "replace"))
    if path.suffix == ".parquet":
        out.append(json.dumps(pq.read_table(path).to_pylist(), default=str))
    return out


def test_planted_token_is_in_no_file_of_the_run(scenario: Callable[..., Path], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    token = "tok-" + secrets.token_hex(16)
    # The source variable's name does not look secret; the engine variable's does (HF_TOKEN): the resolved value
    # must be masked wherever the harness copies text it did not write.
    monkeypatch.setenv("HARNESS_REL_PLANTED", token)
    real = build_launch_spec

    def talkative(engine: Any, arm: Any, **kwargs: Any) -> LaunchSpec:
        spec = real(engine, arm, **kwargs)
        if arm.name == "baseline":  # prints the token, then serves
            script = 'echo "loading with HF_TOKEN=$HF_TOKEN"; echo "auth $HF_TOKEN" >&2; exec "$@"'
            return spec.model_copy(update={"entrypoint": ["/bin/sh", "-c", script, "sh", *spec.entrypoint]})
        script = 'echo "fatal: token $HF_TOKEN rejected" >&2; exit 3'  # prints it and dies: a failure log tail
        return spec.model_copy(update={"entrypoint": ["/bin/sh", "-c", script], "args": []})

    monkeypatch.setattr("harness.run.arm_server.build_launch_spec", talkative)
    path = scenario("secret", arms=("baseline", "cpu-16g"), engine={"env": {"HF_TOKEN": "${HARNESS_REL_PLANTED}"}})
    progress = Progress()
    result = run_rollout(path, RunOptions(out_dir=tmp_path / "results"), say=progress)
    assert result.summary is not None and result.run_dir is not None, result.message
    assert result.summary.arms[1].failure is not None, "the second arm's start failed as planned"

    files = [p for p in result.run_dir.rglob("*") if p.is_file()]
    assert len(files) >= 10
    leaks = [str(p) for p in files if any(token in text for text in _texts(p))]
    assert not leaks, f"the token was written to {leaks}"
    assert not [line for line in progress.lines if token in line]
    assert token not in result.message

    log = (result.run_dir / "logs" / "baseline.log").read_text()
    assert f"loading with HF_TOKEN={MASK}" in log and f"auth {MASK}" in log, "the lines were kept, masked"
    tail = " ".join(result.summary.arms[1].failure.log_tail)
    assert f"token {MASK} rejected" in tail
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert all(entry["env_keys"] == ["HF_TOKEN"] for entry in manifest["launches"])
    assert f"token {MASK} rejected" in (result.run_dir / "report.html").read_text()


def test_simulator_binds_loopback_unless_told_otherwise(tmp_path: Path) -> None:
    argv = sim_command(port=0, profile="demo")
    assert "--host" not in argv
    out = tmp_path / "stdout.log"
    with out.open("wb") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 30
        line = ""
        while time.monotonic() < deadline and not line:
            line = next((x for x in out.read_text().splitlines() if x.startswith(LISTEN_PREFIX)), "")
            assert proc.poll() is None, "the simulator exited"
            time.sleep(0.05)
        assert line.startswith(LISTEN_PREFIX + "http://127.0.0.1:"), line
        listening = [c for c in psutil.Process(proc.pid).net_connections(kind="inet")
                     if c.status == psutil.CONN_LISTEN]
        assert listening and {c.laddr.ip for c in listening} == {"127.0.0.1"}
    finally:
        stop_process(proc)


def test_disk_tier_rules_hold_at_run_time(scenario: Callable[..., Path], tmp_path: Path) -> None:
    """Directories that were fine at the pre-flight checks and changed before their arm started are refused; a
    cache-loss drill deletes nothing in a directory whose harness marker went missing."""
    foreign, linked, unmarked = tmp_path / "kv-foreign", tmp_path / "kv-link", tmp_path / "kv-unmarked"
    path = scenario("paths", arms=("baseline",),
                    extra_arms=[tiered_arm("foreign", foreign), tiered_arm("linked", linked),
                                tiered_arm("unmarked", unmarked)],
                    drills=[{"kind": "cache_loss", "arm": "unmarked", "before_s": 1, "during_s": 1, "after_s": 0}],
                    steps={"levels": [{"concurrency": 2, "duration_s": 1}]})
    progress = Progress()

    def tamper(_line: str, _p: Progress) -> None:
        foreign.mkdir()
        (foreign / "someone-elses-data.bin").write_bytes(b"precious")
        linked.symlink_to("/etc")

    def unmark(_line: str, p: Progress) -> None:
        p.later(0.3, (unmarked / DISK_TIER_MARKER).unlink)

    progress.on(r"^\[baseline\] step 0 ", tamper)
    progress.on(r"^\[unmarked\] drill cache_loss: ", unmark)
    result = run_rollout(path, RunOptions(out_dir=tmp_path / "results", write_reports=False), say=progress)
    progress.join()
    assert result.summary is not None, result.message
    arms = {a.name: a for a in result.summary.arms}
    assert arms["foreign"].failure is not None and "did not create" in arms["foreign"].failure.message
    assert (foreign / "someone-elses-data.bin").read_bytes() == b"precious"
    assert arms["linked"].failure is not None and "system directory" in arms["linked"].failure.message
    assert arms["unmarked"].failure is None and arms["unmarked"].steps
    drill = result.summary.drills[0]
    assert drill.status == "error" and "not marked as created by the harness" in drill.message
    left = [p for p in (unmarked / "harness-sim-kv").rglob("*") if p.is_file()]
    assert left, "nothing was deleted from the unmarked directory"
