"""``harness plan`` through the CLI (typer's CliRunner on ``harness.cli.app``) with injected host facts: the shipped
scenarios, ``--json``, and bad input that must exit 2 with one message naming the file and the field, never a
traceback."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from harness.cli import app
from harness.host.facts import FakeHostFacts
from harness.plan.checks import runner

ROOT = Path(__file__).resolve().parents[3]
SCENARIOS = ROOT / "scenarios"
GIB = 1 << 30
BIG_HOST = FakeHostFacts(mem_available=256 * GIB, mem_total=512 * GIB, default_disk_free=2000 * GIB)


@pytest.fixture
def host(monkeypatch: pytest.MonkeyPatch) -> FakeHostFacts:
    """The host the CLI's checks see (a big GPU box unless a test changes it)."""
    facts = FakeHostFacts(mem_available=BIG_HOST.mem_available, mem_total=BIG_HOST.mem_total,
                          default_disk_free=BIG_HOST.default_disk_free)
    monkeypatch.setattr(runner, "OsHostFacts", lambda: facts)
    return facts


def plan(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["plan", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def write(tmp_path: Path, data: dict, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.dump(data, Dumper=yaml.CSafeDumper))
    return path


def read(name: str) -> dict:
    return yaml.load((SCENARIOS / name).read_text(), Loader=yaml.CSafeLoader)


def test_vllm_tiered_shows_three_arms_and_the_tiering_config(host: FakeHostFacts) -> None:
    code, out, err = plan(str(SCENARIOS / "vllm-tiered.yaml"))
    assert code == 0, out + err
    for arm in ("baseline", "cpu-32g", "cpu-32g-nvme"):
        assert f"{arm} command:" in out
    tiered = out.split("cpu-32g-nvme command:")[1].splitlines()[1]
    argv = shlex.split(tiered)
    cfg = json.loads(argv[argv.index("--kv-transfer-config") + 1])
    extra = cfg["kv_connector_extra_config"]
    assert extra["spec_name"] == "TieringOffloadingSpec"
    assert extra["secondary_tiers"][0]["type"] == "fs" and extra["secondary_tiers"][0]["root_dir"] == "/kv-tier/0"
    assert "volume: /mnt/nvme/kv-tier:/kv-tier/0 (disk-tier)" in out
    assert "plan ok" in out


def test_vllm_tiered_json_is_the_same_plan_as_data(host: FakeHostFacts) -> None:
    code, out, _ = plan(str(SCENARIOS / "vllm-tiered.yaml"), "--json")
    assert code == 0
    data = json.loads(out)
    assert [a["name"] for a in data["arms"]] == ["baseline", "cpu-32g", "cpu-32g-nvme"]
    assert [a["tier"] for a in data["arms"]] == ["gpu-only", "cpu", "tiered"]
    tiered = data["arms"][2]
    cfg = json.loads(tiered["argv"][tiered["argv"].index("--kv-transfer-config") + 1])
    assert cfg["kv_connector_extra_config"]["spec_name"] == "TieringOffloadingSpec"
    assert cfg["kv_connector_extra_config"]["secondary_tiers"][0]["root_dir"] == "/kv-tier/0"
    assert tiered["disk_tier_dirs"] == ["/mnt/nvme/kv-tier"]
    assert tiered["volumes"][0] == "/mnt/nvme/kv-tier:/kv-tier/0 (disk-tier)"
    assert tiered["command"] == shlex.join(tiered["argv"])
    assert data["ok"] is True and data["source_file"] == str(SCENARIOS / "vllm-tiered.yaml")


def test_vllm_tiered_on_a_small_host_exits_2(host: FakeHostFacts) -> None:
    host.mem_available = 20 * GIB
    code, out, _ = plan(str(SCENARIOS / "vllm-tiered.yaml"))
    assert code == 2
    assert "CPU tier 32.0 GiB + reserve 16.0 GiB (checks.host_reserve_gib) = 48.0 GiB exceeds the host's available " \
           "memory 20.0 GiB" in out
    assert "plan has 2 error(s) in" in out and "vllm-tiered.yaml" in out


def test_trtllm_host_shows_the_rendered_yaml(host: FakeHostFacts) -> None:
    code, out, _ = plan(str(SCENARIOS / "trtllm-host.yaml"))
    assert code == 0, out
    assert "extra-llm-api-host-32g.yaml:" in out
    assert "      host_cache_size: 34359738368" in out
    assert "--extra_llm_api_options /harness/extra-llm-api.yaml" in out
    code, out, _ = plan(str(SCENARIOS / "trtllm-host.yaml"), "--json")
    data = json.loads(out)
    rendered = yaml.safe_load(data["arms"][1]["config_files"]["extra-llm-api-host-32g.yaml"])
    assert rendered["kv_cache_config"]["host_cache_size"] == 32 * GIB
    assert rendered["enable_iter_perf_stats"] is True


def test_pilot_plans(host: FakeHostFacts) -> None:
    code, out, _ = plan(str(SCENARIOS / "vllm-cpu-pilot.yaml"))
    assert code == 0 and "--kv-offloading-size 16 --kv-offloading-backend native" in out
    assert "env (values not shown): HF_TOKEN" in out


def test_latest_image_exits_2_asking_for_a_pinned_version(host: FakeHostFacts, tmp_path: Path) -> None:
    data = read("vllm-cpu-pilot.yaml")
    data["engine"]["image"] = "vllm/vllm-openai:latest"
    path = write(tmp_path, data)
    code, out, _ = plan(str(path))
    assert code == 2
    assert "engine.image 'vllm/vllm-openai:latest' uses the moving tag 'latest'; pin a version" in out
    assert str(path) in out and "Traceback" not in out
    code, out, _ = plan(str(path), "--allow-unpinned")
    assert code == 0 and "allowed by --allow-unpinned" in out


def test_cpu_arm_changing_max_num_seqs_exits_2_naming_it(host: FakeHostFacts, tmp_path: Path) -> None:
    data = read("vllm-cpu-pilot.yaml")
    data["arms"][1]["engine"] = {"max_num_seqs": 128}
    code, out, _ = plan(str(write(tmp_path, data)))
    assert code == 2
    assert "arms[1].engine.max_num_seqs differs from the baseline (256 -> 128)" in out


def test_cpu_tier_beyond_available_memory_exits_2_naming_both_sizes(host: FakeHostFacts, tmp_path: Path) -> None:
    host.mem_available = 24 * GIB
    data = read("vllm-cpu-pilot.yaml")
    data["arms"][1]["offload"]["kv_offloading_size_gib"] = 64
    code, out, _ = plan(str(write(tmp_path, data)))
    assert code == 2
    assert "CPU tier 64.0 GiB" in out and "available memory 24.0 GiB" in out


def test_plan_uses_the_real_host_by_default(tmp_path: Path) -> None:
    data = read("vllm-cpu-pilot.yaml")
    data["arms"][1]["offload"]["kv_offloading_size_gib"] = 60000  # more than any test host has
    code, out, _ = plan(str(write(tmp_path, data)))
    assert code == 2 and "CPU tier 60000.0 GiB" in out


def _bad(tmp_path: Path, text: str) -> tuple[int, str]:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    code, out, err = plan(str(path))
    assert "Traceback" not in out + err
    return code, err


def _mutated(name: str, change: str, replacement: str) -> str:
    text = (SCENARIOS / name).read_text()
    assert change in text
    return text.replace(change, replacement, 1)


@pytest.mark.parametrize(("text", "path", "valid"), [
    ("name: x\nengine: [\n", "line 3, column 1: malformed YAML", "node content"),
    (_mutated("vllm-cpu-pilot.yaml", "  seed: 7", "  seed: 7\n  sede: 3"), "workload.sede: unknown key 'sede'",
     "valid keys here: seed, api"),
    (_mutated("vllm-cpu-pilot.yaml", "tensor_parallel_size: 1 ", "tensor_parallel_size: two "),
     "engine.tensor_parallel_size:", "Input should be a valid integer"),
    (_mutated("vllm-cpu-pilot.yaml", "kv_offloading_size_gib: 16 ", "kv_offloading_size_gib: -16 "),
     "arms[1].offload.kv_offloading_size_gib:", "Input should be greater than 0 (got -16)"),
    (_mutated("vllm-tiered.yaml", "cpu_bytes_to_use: 34359738368 ", "cpu_bytes_to_use: 34359738368000000 "),
     "arms[1].offload.cpu_bytes_to_use:", "Input should be less than or equal to 70368744177664 (64 TiB)"),
    (_mutated("trtllm-host.yaml", "host_cache_size: 34359738368 ", "host_cache_size: -1 "),
     "arms[1].offload.host_cache_size:", "greater than or equal to 0"),
    (_mutated("vllm-cpu-pilot.yaml", "      kind: vllm-native\n", ""), "arms[1].offload: kind is missing",
     "one of none, vllm-native, vllm-connector, trtllm"),
    (_mutated("vllm-cpu-pilot.yaml", "kind: vllm-native", "kind: cpu"), "arms[1].offload: unknown kind 'cpu'",
     "valid kinds: 'none', 'vllm-native'"),
    (_mutated("vllm-cpu-pilot.yaml", "    tier: cpu\n", "    tier: cpu\n    engine: {max_num_seqs: 0}\n"),
     "arms[1].engine.max_num_seqs:", "greater than or equal to 1"),
    (_mutated("vllm-cpu-pilot.yaml", "  seed: 7", "  seed: 7\n  seed: 8"), "line ",
     "key 'seed' appears twice"),
])
def test_bad_input_exits_2_with_file_field_and_fix(host: FakeHostFacts, tmp_path: Path, text: str, path: str,
                                                   valid: str) -> None:
    code, err = _bad(tmp_path, text)
    assert code == 2
    assert err.startswith(f"error: {tmp_path / 'bad.yaml'}: {path}"), err
    assert valid in err


def test_missing_file_exits_2(host: FakeHostFacts, tmp_path: Path) -> None:
    code, out, err = plan(str(tmp_path / "nope.yaml"))
    assert code == 2 and f"{tmp_path / 'nope.yaml'}: file not found" in err and "Traceback" not in out + err


def test_bad_set_override_exits_2(host: FakeHostFacts) -> None:
    code, out, err = plan(str(SCENARIOS / "vllm-cpu-pilot.yaml"), "--set", "engine.image=[")
    assert code == 2 and "--set: engine.image: value '[' is not valid YAML" in err and "Traceback" not in out + err


def test_unusable_disk_tier_exits_2(host: FakeHostFacts, tmp_path: Path) -> None:
    data = read("vllm-tiered.yaml")
    data["arms"][2]["offload"]["secondary_tiers"][0]["root_dir"] = "/"
    code, out, _ = plan(str(write(tmp_path, data)))
    assert code == 2 and "arms[2].offload.secondary_tiers[0].root_dir: root_dir / is a system directory" in out


def test_tiered_trtllm_arm_exits_2(host: FakeHostFacts, tmp_path: Path) -> None:
    data = read("trtllm-host.yaml")
    data["arms"][1]["tier"] = "tiered"
    code, out, _ = plan(str(write(tmp_path, data)))
    assert code == 2 and "only host-memory offload (kv_cache_config.host_cache_size) is configured" in out


def test_installed_entry_point_never_prints_a_traceback(tmp_path: Path) -> None:
    import subprocess
    import sys

    bad = tmp_path / "bad.yaml"
    bad.write_text(_mutated("vllm-cpu-pilot.yaml", "kind: vllm-native", "kind: cpu"))
    proc = subprocess.run([sys.executable, "-c", "from harness.cli import main; main()", "plan", str(bad)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert f"{bad}: arms[1].offload: unknown kind 'cpu'" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
