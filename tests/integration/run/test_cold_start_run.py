"""Proof of state and of use against the simulator: every arm records its cold start and its predicted vs measured
tier hits; an arm started on a disk tier a previous run filled (the emptying step disabled) is marked and held; a
run whose metrics lack the hit counters reports its starts not proven; attached servers reset through the engine's
own endpoint are proven by a canary, or their failed reset is recorded."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from harness.config import load_scenario
from harness.engines import build_launch_spec
from harness.host import disk_tier
from harness.host.labels import DISK_TIER_MARKER
from harness.run import virtual_arm
from harness.run.cold_readers import HIT_QUANTITIES
from harness.run.options import RunOptions
from harness.run.orchestrator import run_rollout
from harness.run.ports import free_port
from tests.support.sim import stop_process

ARM = "cpu-16g-disk"


def cold_start_lines(markdown: str) -> dict[str, str]:
    """summary.md's cold-start section: arm -> its line."""
    lines = markdown.split("Cold start (proof of state at each arm's start):", 1)[1].strip().split("\n\n")[0]
    return {ln[2:].split(":", 1)[0]: ln for ln in lines.splitlines()}


def _run(scenario: Path, out: Path) -> tuple[dict[str, Any], Path]:
    result = run_rollout(scenario, RunOptions(out_dir=out, only=[ARM]), say=lambda m: None)
    assert result.run_dir is not None
    summary = json.loads((result.run_dir / "summary.json").read_text())
    return next(a for a in summary["arms"] if a["name"] == ARM), result.run_dir


def test_cold_start_then_a_warm_disk_tier_is_marked(short_scenario: Callable[..., Path], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = short_scenario()
    arm, _ = _run(scenario, tmp_path / "first")
    cold = arm["cold_start"]
    assert (cold["cold"], cold["proof"]) == (True, "proven"), cold
    assert cold["actions"] == ["fresh-process", "emptied-disk-tier"]
    assert cold["checked"] == ["counters", "disk-tier", "probe"]
    assert cold["probe"]["cached_tokens"] == 0 and cold["probe"]["hit_tokens_delta"] == 0
    prediction = arm["hit_prediction"]
    assert prediction is not None and len(prediction["steps"]) == 2
    assert "re-derived from the request plan" in prediction["sources"][-1]
    for row in prediction["steps"]:
        for side in ("predicted", "measured"):
            assert all(row[side][s] is not None for s in ("gpu", "cpu", "disk")), row
    tier = tmp_path / "kv-tier"
    assert [p for p in tier.rglob("*") if p.is_file() and p.name != DISK_TIER_MARKER], "the first run wrote no tier"

    monkeypatch.setattr(disk_tier, "clear_contents", lambda path: 0)  # the tier is not emptied: a warm start
    arm, run_dir = _run(scenario, tmp_path / "second")
    warm = arm["cold_start"]
    assert (warm["cold"], warm["proof"]) == (False, "warm")
    assert any("warm disk tier" in r for r in warm["reasons"]), warm
    assert arm["decision"] != "go"
    assert any(r.startswith("cold-start:") for r in arm["reasons"]), arm["reasons"]
    assert "NOT A COLD START" in (run_dir / "report.html").read_text()


def test_a_run_whose_metrics_lack_the_hit_counters_reports_not_proven(short_scenario: Callable[..., Path],
                                                                       tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe still sees 0 cached tokens and the tier is still emptied, but with no hit counter on the metrics
    nothing that could fail was read: not proven in summary.json, summary.md and report.html, and not held for it."""
    monkeypatch.setattr(virtual_arm, "counters_from", lambda bodies, engine: (dict.fromkeys(HIT_QUANTITIES), None))
    result = run_rollout(short_scenario(clock="virtual"), RunOptions(out_dir=tmp_path / "out", only=[ARM]),
                         say=lambda m: None)
    assert result.run_dir is not None
    summary = json.loads((result.run_dir / "summary.json").read_text())
    arm = next(a for a in summary["arms"] if a["name"] == ARM)
    cold = arm["cold_start"]
    assert (cold["proof"], cold["cold"]) == ("not-proven", None), cold
    assert cold["actions"] == ["fresh-process", "emptied-disk-tier"]
    assert cold["probe"]["cached_tokens"] == 0 and "counters" not in cold["checked"]
    assert not any(r.startswith("cold-start:") for r in arm["reasons"])  # not proven does not decide
    html = (result.run_dir / "report.html").read_text()
    assert f'id="cold-start-{ARM}" data-proof="not-proven"' in html
    assert "**not proven**" in cold_start_lines((result.run_dir / "summary.md").read_text())[ARM]


def _start_sim(argv: list[str], dev_mode: bool) -> tuple[subprocess.Popen[bytes], str]:
    """A simulator started as a user would (no harness parent), with vLLM's dev routes or without."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_PARENT", "VLLM_SERVER_DEV_MODE")}
    if dev_mode:
        env["VLLM_SERVER_DEV_MODE"] = "1"
    i = argv.index("--port")
    proc = subprocess.Popen([*argv[:i + 1], str(port), *argv[i + 2:]], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    return proc, f"http://127.0.0.1:{port}"


def _warm(url: str, model: str) -> None:
    """Traffic before the run: a shared prefix, sent until the server's hit counters are well above zero."""
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(url + "/v1/models", timeout=2.0, trust_env=False).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, f"simulator at {url} not ready"
        time.sleep(0.1)
    prompt = " ".join(f"shared{i}" for i in range(400))
    for _ in range(3):
        reply = httpx.post(url + "/v1/completions", json={"model": model, "prompt": prompt, "max_tokens": 2},
                           timeout=30.0, trust_env=False)
        assert reply.status_code == 200, reply.text


def test_attached_servers_reset_through_the_engine(short_scenario: Callable[..., Path], tmp_path: Path) -> None:
    """Two warm attached servers with ``cold_start: engine-reset``: the one serving vLLM's dev routes is reset,
    its counters re-read (still above zero: they only grow) and a canary shows the reset emptied it (proven); the
    one without the route answers 404, recorded as a failed reset, and its start is judged as found (warm)."""
    path = short_scenario()
    data = yaml.safe_load(path.read_text())
    data["arms"] = [a for a in data["arms"] if a["name"] in ("baseline", "cpu-16g")]
    sc = load_scenario(path)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for arm in data["arms"]:
            spec = build_launch_spec(sc.engine, next(a for a in sc.arms if a.name == arm["name"]), host_port=1)
            proc, url = _start_sim(spec.argv(), dev_mode=arm["name"] == "cpu-16g")
            procs.append(proc)
            _warm(url, spec.served_model_name)
            arm["server"] = {"base_url": url, "cold_start": "engine-reset", "readiness_timeout_s": 30}
        data["engine"]["launcher"] = "external"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        result = run_rollout(path, RunOptions(out_dir=tmp_path / "out"), say=lambda m: None)
        assert result.run_dir is not None
        arms = {a["name"]: a for a in json.loads((result.run_dir / "summary.json").read_text())["arms"]}
        html = (result.run_dir / "report.html").read_text()
    finally:
        for proc in procs:
            stop_process(proc)
    reset = arms["cpu-16g"]["cold_start"]
    assert (reset["proof"], reset["actions"]) == ("proven", ["engine-reset"]), reset
    record = reset["reset"]
    assert (record["status"], record["success"], record["error"]) == (200, True, None)
    assert record["counters_before"]["hit_tokens.total"] > 0  # warm before the reset
    assert record["counters_after"]["hit_tokens.total"] >= record["counters_before"]["hit_tokens.total"]
    assert record["canary"]["repeat_hit_tokens"] > 0 and record["canary"]["after_reset_hit_tokens"] == 0
    assert 'id="cold-start-cpu-16g" data-proof="proven"' in html
    failed = arms["baseline"]["cold_start"]
    assert failed["proof"] == "warm" and failed["actions"] == []
    assert failed["reset"]["status"] == 404 and failed["reset"]["error"] and failed["reset"]["success"] is None
    assert failed["reset"]["canary"]["after_reset_hit_tokens"] is None  # no canary after a failed reset
    assert 'id="cold-start-baseline" data-proof="warm"' in html
