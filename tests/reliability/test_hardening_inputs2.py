"""Issue 25 (hostile pass), input problems 10, 11, 13, the external-arm part of 14 and the plan's wording (16).

Each input problem is refused by ``harness plan`` with exit 2 and a line naming the file and field, before a run
could fail on it; what cannot be refused there is said where it is found:

* 10: ``steps.search.high`` above what one probe step may run (the config and the probe level share one bound);
* 11: ``load.master_bind_host: '::'`` runs (IPv6, every interface), a name that does not resolve is refused;
* 13: a ``sim_profile_file`` the simulator refuses is refused by ``plan`` with the simulator's own reader; a
  malformed capacity-probe entry in ``steps.jsonl`` names the file, line and field; a baseline whose record parts
  cannot be read gives no verdict: ``failed``, ``harness report`` exits 4 and summary.md says what is missing;
* 14: an external arm's declared ``max_num_seqs`` is compared where the server exposes it, otherwise an explicit
  "not verifiable" finding; a backend label is not "verified" on a server that has no CPU tier;
* 16: ``plan`` shows a level's ``requests`` bound, and for ``launcher: external`` no launch command, no "fresh
  server" and no /dev/shm needs.

Commands run as ``python -m harness`` subprocesses (what the console script runs), on loopback only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from rel_support import make_scenario

from harness.config.arms import Arm
from harness.config.engine import EngineSpec
from harness.decision.capacity import Probe
from harness.decision.live_config import overview
from harness.run.capacity import _level
from harness.run.live_compare import compare, refusal
from harness.run.live_config import LiveConfig, read_vllm_metrics

CASE_TIMEOUT_S = 60.0
RUN_TIMEOUT_S = 240.0
SEARCH = {"budget_ms": 60000, "low": 2, "high": 4, "probe_duration_s": 0.5, "max_probes": 2, "resolution": "100%"}


def harness(*args: str, tmp: Path, timeout: float = CASE_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HARNESS_STATE_DIR": str(tmp / "state"), "NO_COLOR": "1", "COLUMNS": "200"}
    env.pop("HARNESS_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=tmp, env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL, check=False)


def refused(res: subprocess.CompletedProcess[str], *needles: str, code: int = 2) -> str:
    """Exit ``code``, no traceback, and one output line holding every needle (that line)."""
    text = res.stdout + res.stderr
    assert res.returncode == code, (res.returncode, text[-3000:])
    assert "Traceback" not in text, text[-3000:]
    lines = [line for line in text.splitlines() if all(n in line for n in needles)]
    assert lines, f"no line holds {needles}: {text[-3000:]}"
    return lines[0]


def scenario(tmp: Path, name: str, **over: Any) -> Path:
    return make_scenario(tmp / f"{name}.yaml", tmp / "kv", arms=("baseline", "cpu-16g"), **over)


def edit(path: Path, change: Any) -> Path:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


# --- 10: one bound for steps.search and the probe levels -----------------------------------------------------------


def test_search_high_above_what_a_probe_can_run_is_refused_at_plan(tmp_path: Path) -> None:
    path = scenario(tmp_path, "high", steps={"levels": [{"concurrency": 2, "duration_s": 1.0}],
                                             "search": {**SEARCH, "high": 200_000}})
    refused(harness("plan", str(path), tmp=tmp_path), str(path.name), "search.high", "100,000")
    path = scenario(tmp_path, "long", steps={"levels": [{"concurrency": 2, "duration_s": 1.0}],
                                             "search": {**SEARCH, "probe_duration_s": 86_400, "extend_factor": 2}})
    refused(harness("plan", str(path), tmp=tmp_path), str(path.name), "probe_duration_s x extend_factor")


SEARCH_EDGES = [{"high": 100_000}, {"high": 100_001}, {"high": 1_000_000},
                {"probe_duration_s": 86_400, "extend_factor": 2}, {"probe_requests": 100_000_000, "extend_factor": 10}]


def test_every_search_the_config_accepts_builds_its_probe_levels() -> None:
    """Whatever ``steps.search`` accepts, the run can build every probe of it (its top load, re-run longer); what
    a probe could not run is refused where the scenario is read (exit 2 at plan)."""
    from pydantic import ValidationError

    from harness.config.steps import StepsSpec

    accepted = []
    for search in SEARCH_EDGES:
        try:
            steps = StepsSpec.model_validate({"levels": [{"concurrency": 2, "duration_s": 1}],
                                              "search": {**SEARCH, "high": 8, **search}})
        except ValidationError:
            continue
        assert steps.search is not None
        accepted.append(search)
        for extended in (False, True):
            level = _level(steps.search, "concurrency", Probe(steps.search.high, "unresolved", extended))
            assert level.concurrency == int(steps.search.high)
    assert {"high": 100_000} in accepted  # the largest step a level may run is still a valid search


# --- 11: the master's bind host ----------------------------------------------------------------------------------


def test_unresolvable_master_bind_host_is_refused_at_plan(tmp_path: Path) -> None:
    path = scenario(tmp_path, "nores", load={"processes": 2, "master_bind_host": "no-such-host.invalid"})
    refused(harness("plan", str(path), tmp=tmp_path), "master-bind", "load.master_bind_host",
            "no-such-host.invalid", "does not resolve")


def test_master_bind_host_ipv6_any_runs(tmp_path: Path) -> None:
    path = make_scenario(tmp_path / "v6.yaml", tmp_path / "kv", arms=("baseline",),
                         load={"processes": 2, "master_bind_host": "::"},
                         steps={"levels": [{"concurrency": 2, "duration_s": 1.0}], "scrape_interval_s": 0.5,
                                "drain_timeout_s": 3, "request_timeout_s": 30, "stream_idle_timeout_s": 5})
    run = harness("run", str(path), "--out", str(tmp_path / "r"), tmp=tmp_path, timeout=RUN_TIMEOUT_S)
    text = run.stdout + run.stderr
    assert "Traceback" not in text and "gaierror" not in text, text[-3000:]
    (run_dir,) = [p for p in (tmp_path / "r").iterdir() if p.is_dir()]
    steps = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    measured = [s for s in steps if s["step"] == 0]
    assert measured and measured[0]["requests"] > 0 and not measured[0].get("error"), (measured, text[-2000:])
    assert measured[0]["client"]["processes"] == 2
    plan = harness("plan", str(path), tmp=tmp_path)
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "the load master can listen at ::" in plan.stdout


# --- 13: profile files, capacity-probe entries, unreadable records -------------------------------------------------


def _with_profile(tmp: Path, name: str, text: str) -> Path:
    profile = tmp / f"{name}-profile.yaml"
    profile.write_text(text, encoding="utf-8")

    def change(data: dict[str, Any]) -> None:
        data["engine"].pop("sim_profile", None)
        data["engine"]["sim_profile_file"] = str(profile)
    return edit(scenario(tmp, name), change)


def test_a_profile_file_the_simulator_refuses_is_refused_by_plan(tmp_path: Path) -> None:
    path = _with_profile(tmp_path, "incomplete", "name: x\nmodel: {name: m}\n")
    line = refused(harness("plan", str(path), tmp=tmp_path), "sim-start", "engine.sim_profile_file",
                   "model.num_layers")
    assert "incomplete-profile.yaml" in line
    sim = harness("sim", "serve", "--port", "0", "--profile-file", str(tmp_path / "incomplete-profile.yaml"),
                  tmp=tmp_path)
    assert sim.returncode == 2 and "model.num_layers" in sim.stderr  # the same reader, the same refusal
    run = harness("run", str(path), "--out", str(tmp_path / "r"), tmp=tmp_path)
    refused(run, "sim-start", "engine.sim_profile_file")  # run refuses it too, before any server starts
    assert "starting sim" not in run.stdout


def test_a_profile_that_leaves_no_kv_memory_is_refused_by_plan(tmp_path: Path) -> None:
    shipped = Path(__file__).resolve().parents[2] / "harness" / "sim" / "profiles" / "h200-llama3-8b.yaml"
    data = yaml.safe_load(shipped.read_text(encoding="utf-8"))
    data["gpu"]["weights_bytes"] = data["gpu"]["memory_bytes"]  # the weights fill the GPU: no KV cache
    path = _with_profile(tmp_path, "full", yaml.safe_dump(data))
    refused(harness("plan", str(path), tmp=tmp_path), "sim-start", "simulator would refuse to start",
            "No available memory for the cache blocks")


@pytest.fixture(scope="module")
def search_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One fast simulator run with a capacity search (two probes per arm)."""
    base = tmp_path_factory.mktemp("inputs2")
    path = scenario(base, "cap", steps={"levels": [{"concurrency": 2, "duration_s": 1.0}], "search": SEARCH,
                                        "scrape_interval_s": 0.5, "drain_timeout_s": 3, "request_timeout_s": 30,
                                        "stream_idle_timeout_s": 5})
    run = harness("run", str(path), "--out", str(base / "results"), tmp=base, timeout=RUN_TIMEOUT_S)
    assert run.returncode in (0, 3, 5), run.stdout[-3000:] + run.stderr[-3000:]
    (run_dir,) = [p for p in (base / "results").iterdir() if p.is_dir()]
    return run_dir


def _probe_edit(src: Path, dest: Path, search: dict[str, Any]) -> int:
    """Copy the run; the cpu-16g arm's first probe entry gets ``search`` merged in; its line number."""
    shutil.copytree(src, dest)
    lines = (dest / "steps.jsonl").read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        entry = json.loads(line)
        if entry.get("search") and entry["arm"] == "cpu-16g":
            entry["search"] = {**entry["search"], **search}
            lines[i] = json.dumps(entry)
            (dest / "steps.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
            return i + 1
    raise AssertionError("no probe entry")


@pytest.mark.parametrize(("search", "field"), [({"load": 1.7e308}, "search.load"), ({"load": -5}, "search.load"),
                                               ({"load": 0}, "search.load"), ({"session": -3}, "search.session")])
def test_a_malformed_probe_entry_names_file_line_and_field(search_run: Path, tmp_path: Path,
                                                          search: dict[str, Any], field: str) -> None:
    run_dir = tmp_path / "run"
    line = _probe_edit(search_run, run_dir, search)
    started = time.monotonic()
    refused(harness("report", str(run_dir), tmp=tmp_path), "steps.jsonl", f"line {line}", field)
    assert time.monotonic() - started < CASE_TIMEOUT_S


def test_unreadable_baseline_records_give_no_quiet_verdict(search_run: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(search_run, run_dir)
    (run_dir / "requests.parquet").unlink()  # as an interrupted run leaves it: the parts are the records
    parts = sorted((run_dir / "records" / "baseline").glob("part-s000-*.parquet"))
    assert parts
    for part in parts:
        part.write_bytes(b"not parquet")
    journal = [json.loads(line) for line in (run_dir / "steps.jsonl").read_text().splitlines()]
    counted = next(e["requests"] for e in journal if e["arm"] == "baseline" and e["step"] == 0)
    res = harness("report", str(run_dir), tmp=tmp_path)
    line = refused(res, "request records are missing", "baseline step 0", code=4)
    assert f"steps.jsonl counts {counted:,} requests, 0 records can be read" in line
    assert parts[0].name in line
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert summary["verdict"] == "failed" and summary["exit_code"] == 4 and summary["recommended_arm"] is None
    assert summary["records_missing"] and "request records are missing" in summary["verdict_reason"]
    assert "request records are missing" in (run_dir / "summary.md").read_text(encoding="utf-8")
    untouched = harness("report", str(search_run), tmp=tmp_path)  # the intact run: its verdict stands
    assert untouched.returncode == 0, untouched.stderr[-2000:]
    assert json.loads((search_run / "summary.json").read_text())["records_missing"] == []


# --- 14: an external arm's scheduler limits ----------------------------------------------------------------------

CACHE_INFO = ('vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",'
              'gpu_memory_utilization="0.9",kv_offloading_backend="native",kv_offloading_size="None",'
              'num_gpu_blocks="1000"} 1.0\n')


def _live(text: str) -> LiveConfig:
    live = LiveConfig(flavor="vllm", models=[{"id": "m", "root": "m", "max_model_len": 8192}])
    read_vllm_metrics(text, live)
    return live


def _engine(**over: Any) -> EngineSpec:
    return EngineSpec.model_validate({"kind": "vllm", "launcher": "external", "model": "m", **over})


def test_declared_max_num_seqs_is_not_verifiable_when_the_server_does_not_expose_it() -> None:
    arm = Arm.model_validate({"name": "baseline", "tier": "gpu-only", "server": {"base_url": "http://127.0.0.1:1"}})
    findings = compare(arm, _engine(max_num_seqs=16), _live(CACHE_INFO), {})
    seqs = [f for f in findings if f.field == "max_num_seqs"]
    assert [f.status for f in seqs] == ["unverified"], findings
    assert "max_num_seqs (16 declared): not verifiable" in overview(findings)


def test_declared_max_num_seqs_that_differs_from_the_servers_is_a_mismatch() -> None:
    arm = Arm.model_validate({"name": "baseline", "tier": "gpu-only", "server": {"base_url": "http://127.0.0.1:1"}})
    text = CACHE_INFO + 'vllm:scheduler_config_info{max_num_seqs="256",max_num_batched_tokens="8192"} 1.0\n'
    findings = compare(arm, _engine(max_num_seqs=16), _live(text), {})
    why = refusal("baseline", findings)
    assert why is not None and "declared max_num_seqs 16, the live server reports 256" in why


def test_no_backend_is_verified_on_a_server_without_a_cpu_tier() -> None:
    arm = Arm.model_validate({"name": "cpu-16g", "tier": "cpu", "server": {"base_url": "http://127.0.0.1:2"},
                              "offload": {"kind": "vllm-native", "kv_offloading_size_gib": 16}})
    findings = compare(arm, _engine(), _live(CACHE_INFO), {})
    text = overview(findings)
    assert "CPU tier backend" not in text, text
    assert "declared CPU tier 16 GiB, the live server reports no CPU tier" in text


# --- 16: the plan's wording --------------------------------------------------------------------------------------


def test_plan_shows_request_bounds_and_no_launch_for_external_servers(tmp_path: Path) -> None:
    arms = [{"name": "baseline", "tier": "gpu-only", "server": {"base_url": "http://127.0.0.1:18001"}},
            {"name": "cpu-16g", "tier": "cpu", "offload": {"kind": "vllm-native", "kv_offloading_size_gib": 16},
             "server": {"base_url": "http://127.0.0.1:18002"}}]
    path = make_scenario(tmp_path / "ext.yaml", tmp_path / "kv", arms=(), extra_arms=arms,
                         steps={"levels": [{"concurrency": 2, "duration_s": 1.0, "requests": 50}]})
    edit(path, lambda data: data["engine"].update({"launcher": "external"}))
    res = harness("plan", str(path), tmp=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    assert "Steps per arm: c2 for 1 s or 50 req, whichever comes first" in out
    assert "fresh server" not in out and "command:" not in out and "/dev/shm:" not in out, out
    assert "harness.sim serve" not in out, out
    assert "baseline server: http://127.0.0.1:18001 (existing; not started here" in out
    plan = json.loads(harness("plan", str(path), "--json", tmp=tmp_path).stdout)
    assert [a["command"] for a in plan["arms"]] == ["", ""]
    assert [a["server_url"] for a in plan["arms"]] == ["http://127.0.0.1:18001", "http://127.0.0.1:18002"]
