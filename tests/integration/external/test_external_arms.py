"""Existing deployments as arms: simulator servers the test starts (and stops) on 127.0.0.1, driven by `harness run`
with ``engine.launcher: external``. The harness judges them, refuses the arm whose live CPU tier differs from the
declared one (both values named), runs drills only through the user's commands, and leaves every server running,
through the run and through ``harness cleanup --all-stale``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "reliability"))
from rel_support import make_scenario

from harness.config import load_scenario
from harness.config.arms import Arm
from harness.engines import build_launch_spec
from harness.run.ports import free_port

HARNESS = str(Path(sys.executable).with_name("harness"))
EXIT_BY_VERDICT = {"go": 0, "no-go": 1, "hold": 3, "failed": 4, "slo-unmet": 5}
SECRET = "s3cr3t-token-value-42"


def _wait_ready(url: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/v1/models", timeout=2.0, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"simulator at {url} not ready within {timeout_s} s")


class Deployments:
    """Simulator servers started as a user would (no harness parent), stopped by the test."""

    def __init__(self) -> None:
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.urls: dict[str, str] = {}

    def start(self, name: str, argv: list[str]) -> str:
        port = free_port()
        argv = [a if a != "PORT" else str(port) for a in argv]
        env = {k: v for k, v in os.environ.items() if k != "HARNESS_PARENT"}
        self.procs[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL, env=env, start_new_session=True)
        self.urls[name] = f"http://127.0.0.1:{port}"
        return self.urls[name]

    def alive(self, name: str) -> bool:
        return self.procs[name].poll() is None and psutil.pid_exists(self.procs[name].pid)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


@pytest.fixture
def deployments() -> Iterator[Deployments]:
    d = Deployments()
    try:
        yield d
    finally:
        d.stop()


def _sim_argv(scenario: Path, arm: dict[str, Any]) -> list[str]:
    """The command `harness sim serve` would get for this arm (its own settings), on a port chosen later."""
    sc = load_scenario(scenario)
    spec = build_launch_spec(sc.engine, Arm.model_validate({k: arm[k] for k in ("name", "tier", "offload")}),
                             host_port=1)
    args = spec.argv()
    i = args.index("--port")
    return [*args[:i + 1], "PORT", *args[i + 2:]]


def _cpu_arm(name: str, gib: float, **server: Any) -> dict[str, Any]:
    return {"name": name, "tier": "cpu", "offload": {"kind": "vllm-native", "kv_offloading_size_gib": gib},
            "server": server}


def test_external_arms_are_judged_refused_on_live_mismatch_and_left_running(tmp_path: Path,
                                                                             deployments: Deployments) -> None:
    marker = tmp_path / "restarted"
    arms = [{"name": "baseline", "tier": "gpu-only", "server": {"base_url": "http://placeholder:1"}},
            _cpu_arm("cpu-16g", 16, base_url="http://placeholder:2",
                     restart_command=f"echo restarting --token {SECRET}; touch {marker}", command_timeout_s=20),
            _cpu_arm("cpu-16g-b", 16, base_url="http://placeholder:3")]
    path = make_scenario(tmp_path / "external.yaml", tmp_path / "tier", arms=(), extra_arms=arms,
                         drills=[{"kind": "restart", "arm": "cpu-16g", "before_s": 0, "during_s": 1, "after_s": 0},
                                 {"kind": "cache_loss", "arm": "cpu-16g", "before_s": 0.5, "during_s": 0.5,
                                  "after_s": 0}])
    data = yaml.safe_load(path.read_text())
    data["engine"]["launcher"] = "external"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    # The deployments: the baseline's and cpu-16g's as declared; cpu-16g-b's server runs an 8 GiB CPU tier.
    live = {"baseline": {"kind": "none"}, "cpu-16g": arms[1]["offload"],
            "cpu-16g-b": {"kind": "vllm-native", "kv_offloading_size_gib": 8}}
    for arm in data["arms"]:
        argv = _sim_argv(path, {**arm, "offload": live[arm["name"]]})
        arm["server"]["base_url"] = deployments.start(arm["name"], argv)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    for url in deployments.urls.values():
        _wait_ready(url)
    pids = {name: p.pid for name, p in deployments.procs.items()}

    state = tmp_path / "state"
    env = {**os.environ, "HARNESS_STATE_DIR": str(state)}
    out = tmp_path / "results"
    run = subprocess.run([HARNESS, "run", str(path), "--out", str(out), "--no-validate"], capture_output=True,
                         text=True, timeout=240, env=env, check=False)
    assert "Traceback" not in run.stderr + run.stdout, run.stderr[-3000:]
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert run.returncode == EXIT_BY_VERDICT[summary["verdict"]], (run.returncode, summary["verdict"],
                                                                    run.stdout[-2000:])
    decisions = {a["name"]: a for a in summary["arms"]}
    assert decisions["baseline"]["decision"] == "baseline"
    assert decisions["cpu-16g"]["decision"] in {"go", "hold", "no-go", "slo-unmet"}
    assert all(s["requests"] > 0 for s in decisions["cpu-16g"]["steps"])
    # The refused arm: not judged, both values named, no step run.
    refused = decisions["cpu-16g-b"]
    assert refused["decision"] == "failed" and refused["failure"]["phase"] == "live-config"
    assert ("arm cpu-16g-b: declared CPU tier 16 GiB, the live server reports 8 GiB "
            "(vllm:cache_config_info kv_offloading_size=8") in refused["failure"]["message"]
    assert refused["steps"] == []
    # What was read is recorded and shown in the report (summary checks, report.html).
    checks = {c["arm"]: c for c in summary["checks"] if c["name"] == "live-config"}
    assert set(checks) == {"baseline", "cpu-16g", "cpu-16g-b"}
    assert checks["cpu-16g-b"]["level"] == "error"
    assert checks["cpu-16g"]["level"] in {"ok", "warn"} and "CPU tier 16 GiB" in checks["cpu-16g"]["message"]
    assert "CPU tier none" in checks["baseline"]["message"]
    record = json.loads((run_dir / "live_config" / "cpu-16g.json").read_text())
    assert record["live"]["cache_config"]["kv_offloading_size"] == "16.0" and record["refused"] is False
    assert "8 GiB" in (run_dir / "report.html").read_text()
    # Drills: restart through the user's command (its secret flag value redacted), cache_loss skipped with the reason.
    assert marker.exists()
    drills = {d["kind"]: d for d in summary["drills"]}
    assert drills["cache_loss"]["status"] == "skipped"
    assert "clear_cache_command" in drills["cache_loss"]["message"]
    assert drills["restart"]["status"] != "skipped"
    log = (run_dir / "logs" / "cpu-16g.log").read_text()
    assert "restarting" in log and SECRET not in log
    assert SECRET not in run.stdout and SECRET not in (run_dir / "scenario.yaml").read_text()
    # Never stopped: same pids after the run and after `harness cleanup --all-stale`.
    assert all(deployments.alive(n) and deployments.procs[n].pid == pid for n, pid in pids.items())
    clean = subprocess.run([HARNESS, "cleanup", "--all-stale"], capture_output=True, text=True, timeout=60, env=env,
                           check=False)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert all(deployments.alive(n) and deployments.procs[n].pid == pid for n, pid in pids.items())
    for url in deployments.urls.values():
        assert httpx.get(url + "/v1/models", timeout=5.0, trust_env=False).status_code == 200


def test_two_arms_naming_one_server_are_refused_as_bad_input(tmp_path: Path) -> None:
    arms = [{"name": "baseline", "tier": "gpu-only", "server": {"base_url": "http://localhost:18000"}},
            _cpu_arm("cpu-16g", 16, base_url="http://127.0.0.1:18000/")]
    path = make_scenario(tmp_path / "same.yaml", tmp_path / "tier", arms=(), extra_arms=arms)
    data = yaml.safe_load(path.read_text())
    data["engine"]["launcher"] = "external"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    run = subprocess.run([HARNESS, "run", str(path), "--out", str(tmp_path / "r")], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "HARNESS_STATE_DIR": str(tmp_path / "state")}, check=False)
    assert run.returncode == 2, run.stdout + run.stderr
    text = run.stdout + run.stderr
    assert "same.yaml" in text and "arms[1].server.base_url" in text and "distinct servers" in text
    assert "Traceback" not in text


def test_interrupted_run_leaves_external_servers_running(tmp_path: Path, deployments: Deployments) -> None:
    arms = [{"name": "baseline", "tier": "gpu-only", "server": {"base_url": "http://placeholder:1"}},
            _cpu_arm("cpu-16g", 16, base_url="http://placeholder:2")]
    path = make_scenario(tmp_path / "stop.yaml", tmp_path / "tier", arms=(), extra_arms=arms,
                         steps={"levels": [{"concurrency": 2, "duration_s": 60}]})
    data = yaml.safe_load(path.read_text())
    data["engine"]["launcher"] = "external"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    for arm in data["arms"]:
        arm["server"]["base_url"] = deployments.start(arm["name"], _sim_argv(path, arm | {"offload": arm.get(
            "offload", {"kind": "none"})}))
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    for url in deployments.urls.values():
        _wait_ready(url)
    pids = {name: p.pid for name, p in deployments.procs.items()}
    env = {**os.environ, "HARNESS_STATE_DIR": str(tmp_path / "state")}
    proc = subprocess.Popen([HARNESS, "run", str(path), "--out", str(tmp_path / "r"), "--no-validate"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        for line in proc.stdout:  # bounded: the step runs 60 s, the deadline ends the wait before
            if "[baseline] step 0" in line or time.monotonic() > deadline:
                break
        time.sleep(0.5)  # mid-step
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 4, rest[-2000:]
    assert "Traceback" not in rest
    assert all(deployments.alive(n) and deployments.procs[n].pid == pid for n, pid in pids.items())
    for url in deployments.urls.values():
        assert httpx.get(url + "/v1/models", timeout=5.0, trust_env=False).status_code == 200
