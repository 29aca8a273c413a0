"""The engine's own validation: requests, result parsing, where it runs, plan/run integration -- with a fake engine
interpreter (the real vLLM runs in tests/e2e/test_e2e_validate.py)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.config.scenario import Scenario
from harness.plan.validate import ValidateOptions, validate_scenario, validation_checks
from harness.plan.validate.base import MARK, parse_output, script_text
from harness.plan.validate.engines import replace_model, trtllm_item
from harness.plan.validate.gate import validation_gate
from harness.plan.validate.runner import _command
from harness.secrets.redact import Redactor

REPO = Path(__file__).resolve().parents[4]


def fake_engine(tmp_path: Path, lines: list[dict[str, object]]) -> str:
    """An 'interpreter' that ignores the script and prints these result lines."""
    path = tmp_path / "fake-python"
    body = "\n".join(f"print({json.dumps(MARK + json.dumps(line))})" for line in lines)
    path.write_text(f"#!{sys.executable}\nimport sys\nsys.stdin.read()\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def scenario(name: str = "vllm-cpu-pilot", **engine: object) -> Scenario:
    data = yaml.safe_load((REPO / "scenarios" / f"{name}.yaml").read_text())
    data["engine"].update(engine)
    return Scenario.model_validate(data)


def test_replace_model_covers_flag_and_positional() -> None:
    assert replace_model(["--model", "a", "--x"], "b") == ["--model", "b", "--x"]
    assert replace_model(["--model=a"], "b") == ["--model=b"]
    assert replace_model(["a", "--host", "h"], "b") == ["b", "--host", "h"]


def test_parse_output_redacts_and_reports_missing_arms() -> None:
    out = "\n".join([MARK + json.dumps({"engine_version": "0.32.0"}),
                     MARK + json.dumps({"arm": "a", "status": "rejected", "stage": "parse",
                                        "message": "bad token hf_secret123"})])
    results = parse_output(out, "boom at the end", ["a", "b"], where="w", redact=Redactor(["hf_secret123"]))
    assert results[0].status == "rejected" and "***" in results[0].message and results[0].engine_version == "0.32.0"
    assert results[1].status == "error" and "boom" in results[1].message
    fatal = parse_output(MARK + json.dumps({"fatal": "cannot import vllm"}), "", ["a"], where="w",
                         redact=Redactor([]))
    assert fatal[0].status == "not-checked"


def test_validation_through_an_interpreter(tmp_path: Path) -> None:
    python = fake_engine(tmp_path, [{"engine_version": "0.32.0"},
                                    {"arm": "baseline", "status": "ok", "stage": "engine-config", "message": "built"},
                                    {"arm": "cpu-16g", "status": "platform", "stage": "platform",
                                     "message": "Exception: CPU Offloading is currently only supported on CUDA-alike"}])
    results = validate_scenario(scenario(), ValidateOptions(python=python, model_dir=str(tmp_path)))
    assert [r.status for r in results] == ["ok", "platform"]
    assert all(r.passed for r in results) and "in place of meta-llama" in results[0].notes[0]
    assert [c.level for c in validation_checks(results)] == ["ok", "ok"]


def test_a_hub_model_without_a_local_config_is_not_checked(tmp_path: Path) -> None:
    python = fake_engine(tmp_path, [])
    results = validate_scenario(scenario(), ValidateOptions(python=python))
    assert {r.status for r in results} == {"not-checked"} and "--validate-model" in results[0].message


def test_docker_without_the_image_is_not_checked_with_the_reason(tmp_path: Path) -> None:
    results = validate_scenario(scenario(), ValidateOptions(docker=str(tmp_path / "no-docker")))
    assert {r.status for r in results} == {"not-checked"} and "no docker CLI" in results[0].message


def test_docker_command_passes_env_names_only() -> None:
    scen = scenario(env={"HF_TOKEN": "hf_secret123"})
    cmd = _command(scen.engine, "vllm/vllm-openai:v0.32.0", True, ValidateOptions(model_dir="/tmp/m"), "SCRIPT")
    assert cmd[:4] == ["docker", "run", "--rm", "-i"] and "--network" in cmd and "none" in cmd
    assert "hf_secret123" not in " ".join(cmd) and "HF_TOKEN" in cmd
    assert cmd[cmd.index("--entrypoint") + 1] == "python3" and cmd[-2:] == ["-c", "SCRIPT"]
    assert "/var/cache/huggingface:/root/.cache/huggingface:ro" in cmd


def test_trtllm_request_carries_yaml_model_and_flags() -> None:
    from harness.engines import build_launch_spec

    scen = scenario("trtllm-host")
    item = trtllm_item(build_launch_spec(scen.engine, scen.arms[1]), None)
    assert item["model"] == "meta-llama/Llama-3.1-8B-Instruct" and "--extra_llm_api_options" in item["flags"]
    assert yaml.safe_load(item["yaml"])["kv_cache_config"]["host_cache_size"] == 32 << 30


def test_in_engine_scripts_do_not_import_the_harness() -> None:
    for name in ("vllm_check.py", "trtllm_check.py"):
        text = script_text(name)
        assert "import harness" not in text and "from harness" not in text
        compile(text, name, "exec")


def _trtllm_fake_module(tmp_path: Path, extra_forbidden: bool) -> Path:
    """A stand-in ``tensorrt_llm`` package with pydantic models that forbid extras (the script's result parsing)."""
    pkg = tmp_path / "fake" / "tensorrt_llm"
    (pkg / "llmapi").mkdir(parents=True)
    (pkg / "__init__.py").write_text("__version__ = '1.0.0'\n")
    fields = "enable_block_reuse: bool = True\n    host_cache_size: int = 0\n    free_gpu_memory_fraction: float = .9\n"
    fields += "    secondary_offload_min_priority: int = 35\n"
    (pkg / "llmapi" / "__init__.py").write_text(
        "from pydantic import BaseModel, ConfigDict\n"
        f"class KvCacheConfig(BaseModel):\n    model_config = ConfigDict(extra='forbid')\n    {fields}")
    (pkg / "llmapi" / "llm_args.py").write_text(
        "from pydantic import BaseModel, ConfigDict\n"
        "class TorchLlmArgs(BaseModel):\n    model_config = ConfigDict(extra='forbid')\n    model: str\n"
        "    kv_cache_config: dict = {}\n" + ("" if extra_forbidden else "    return_perf_metrics: bool = False\n")
        + "    enable_iter_perf_stats: bool = False\n")
    return tmp_path / "fake"


@pytest.mark.parametrize("version_has_it", [True, False])
def test_trtllm_script_reports_extra_fields(tmp_path: Path, version_has_it: bool) -> None:
    root = _trtllm_fake_module(tmp_path, extra_forbidden=not version_has_it)
    item = {"arm": "host", "model": "m", "flags": ["--tp_size"],
            "yaml": "kv_cache_config: {host_cache_size: 1}\nenable_iter_perf_stats: true\nreturn_perf_metrics: true\n"}
    proc = subprocess.run([sys.executable, "-c", script_text("trtllm_check.py")], input=json.dumps({"arms": [item]}),
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(root)}, check=False)
    (line,) = [json.loads(x[len(MARK):]) for x in proc.stdout.splitlines() if x.startswith(MARK) and '"arm"' in x]
    if version_has_it:
        assert line["status"] == "ok"
    else:
        assert line["status"] == "rejected" and line["stage"] == "llm_args" and "return_perf_metrics" in line["message"]


def test_run_gate_stops_on_a_rejected_arm(tmp_path: Path) -> None:
    python = fake_engine(tmp_path, [{"arm": "baseline", "status": "ok", "message": "ok"},
                                    {"arm": "cpu-16g", "status": "rejected", "stage": "parse",
                                     "message": "vllm serve: error: unrecognized arguments: --enable-prefix-cashing"}])
    _items, problem = validation_gate(scenario(), ValidateOptions(python=python, model_dir=str(tmp_path)),
                                      tmp_path / "validation.json", say=lambda _m: None)
    assert problem is not None and "unrecognized arguments: --enable-prefix-cashing" in problem
    record = json.loads((tmp_path / "validation.json").read_text())
    assert record["state"] == "validated" and record["arms"][1]["status"] == "rejected"


def test_plan_validate_exits_2_on_a_rejected_arm(tmp_path: Path) -> None:
    python = fake_engine(tmp_path, [{"arm": "baseline", "status": "rejected", "stage": "parse", "message": "nope"}])
    proc = subprocess.run([sys.executable, "-m", "harness", "plan", str(REPO / "scenarios" / "vllm-cpu-pilot.yaml"),
                           "--validate-python", python, "--validate-model", str(tmp_path), "--json"],
                          capture_output=True, text=True, check=False, cwd=REPO)
    assert proc.returncode == 2, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["validation"][0]["status"] == "rejected"
    assert any(c["name"] == "engine-validation" and c["level"] == "error" for c in plan["checks"])
