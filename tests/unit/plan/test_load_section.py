"""The scenario's ``load`` section (validation naming the field, the layout in words), ``processes: auto``'s
growth and cap, the ``--master`` argument of ``harness load-worker``, and per-process client health."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.config import ScenarioError, load_scenario
from harness.config.load import LoadSpec
from harness.load.health import assess
from harness.load.spec import WorkerReport
from harness.load.worker_cli import parse_master
from harness.plan.load_layout import LoadLayout
from harness.schema.summary import ClientHealth

DEMO = Path(__file__).resolve().parents[3] / "scenarios" / "demo-sim.yaml"
HARNESS = str(Path(sys.executable).with_name("harness"))


def _scenario_with(tmp_path: Path, load: object) -> Path:
    data = yaml.safe_load(DEMO.read_text())
    data["load"] = load
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize(("load", "field", "words"), [
    ({"processes": 0}, "load.processes", "from 1 to 256"),
    ({"processes": "many"}, "load.processes", "auto"),
    ({"master_port": 70000}, "load.master_port", "65535"),
    ({"master_bind_host": "not a host!"}, "load.master_bind_host", "IP address"),
    ({"remote_workers": 2}, "load", "needs a fixed master_port"),
    ({"processes": 2, "max_processes": 4}, "load", "apply only to processes: auto"),
    ({"processes": "auto", "min_processes": 4, "max_processes": 2}, "load", "below min_processes"),
    ({"procs": 2}, "load.procs", "did you mean 'processes'"),
])
def test_a_bad_load_section_is_refused_naming_the_field(tmp_path: Path, load: dict[str, object], field: str,
                                                        words: str) -> None:
    with pytest.raises(ScenarioError) as err:
        load_scenario(_scenario_with(tmp_path, load))
    text = str(err.value)
    assert field in text and words in text, text


def test_plan_exits_2_on_a_bad_load_section_and_shows_a_good_one(tmp_path: Path) -> None:
    bad = subprocess.run([HARNESS, "plan", str(_scenario_with(tmp_path, {"remote_workers": 1}))],
                         capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and "needs a fixed master_port" in bad.stderr and "Traceback" not in bad.stderr
    good = subprocess.run([HARNESS, "plan", "--json", str(_scenario_with(
        tmp_path, {"processes": 2, "remote_workers": 3, "master_bind_host": "0.0.0.0", "master_port": 5557}))],
        capture_output=True, text=True, timeout=60, check=False)
    assert '"load": "2 local processes + 3 remote worker(s) joining the master at 0.0.0.0:5557' in good.stdout


def _saturated(value: bool) -> ClientHealth:
    return ClientHealth(saturated=value)


def test_auto_doubles_after_saturated_steps_up_to_the_cap() -> None:
    layout = LoadLayout(LoadSpec(processes="auto", max_processes=6), cores=16)
    seen = []
    for i, saturated in enumerate([False, True, True, False, True, True]):
        seen.append(layout.step_fields()["processes"])
        recorded = layout.after_step(_saturated(saturated), f"step {i}")
        if i == 2:
            assert recorded.layout_note == "raised from 1 to 2 processes after step 1 was saturated"
    assert seen == [1, 1, 2, 4, 4, 6]
    assert layout.change is not None and "the most load.processes: auto allows" in layout.change


def test_auto_is_capped_at_the_cores_and_fixed_counts_never_change() -> None:
    assert LoadLayout(LoadSpec(processes="auto", min_processes=8), cores=2).processes == 2
    fixed = LoadLayout(LoadSpec(processes=3), cores=2)
    fixed.after_step(_saturated(True), "step 0")
    assert fixed.processes == 3 and fixed.change is None
    fields = LoadLayout(LoadSpec(remote_workers=2, master_port=5557, saturation_lag_ms=0)).step_fields()
    assert fields["remote_workers"] == 2 and fields["master_port"] == 5557 and fields["saturation_lag_ms"] == 0


@pytest.mark.parametrize(("text", "words"), [("nope", "HOST:PORT"), ("host:99999", "1 to 65535"),
                                             ("0.0.0.0:5557", "to connect to"), (":5557", "HOST:PORT")])
def test_a_bad_master_is_refused(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        parse_master(text)
    assert parse_master("10.0.0.5:5557") == ("10.0.0.5", 5557)
    assert parse_master("[::1]:5557") == ("::1", 5557)


def test_load_worker_exits_2_on_a_bad_master_and_4_without_one() -> None:
    bad = subprocess.run([HARNESS, "load-worker", "--master", "nope"], capture_output=True, text=True, timeout=60,
                         check=False)
    assert bad.returncode == 2 and "HOST:PORT" in bad.stderr
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    none = subprocess.run([HARNESS, "load-worker", "--master", f"127.0.0.1:{port}", "--idle-timeout", "1"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert none.returncode == 4 and "no master answered" in none.stderr and "Traceback" not in none.stderr


def test_each_process_gets_its_own_health_and_hosts_count_as_machines() -> None:
    workers = [WorkerReport(rank=1, host="b", remote=True, requests=5, cpu_s=9.5, wall_s=10.0, send_lag_ms_p99=1.0),
               WorkerReport(rank=0, host="a", requests=7, cpu_s=1.0, wall_s=10.0, send_lag_ms_p99=2.0)]
    health = assess(cpu_s=10.5, wall_s=10.0, max_process_cpu_percent=95.0, lag_p50_ms=0.5, lag_p99_ms=2.0,
                    processes=2, workers=workers)
    assert health.saturated and health.machines == 2 and health.remote_processes == 1
    assert [(p.rank, p.cpu_percent, p.saturated) for p in health.per_process] == [(0, 10.0, False), (1, 95.0, True)]
    assert "load.processes" in (health.note or "")
