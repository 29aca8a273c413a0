"""Guards on what the engine resolved, the validation record, --require-validation and the check's GPUs -- with fake
engine interpreters and a fake docker CLI (the real vLLM runs in tests/e2e/test_e2e_validate.py)."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

import yaml

from harness.config.scenario import Scenario
from harness.plan.validate import ValidateOptions, validate_scenario, validation_items
from harness.plan.validate.base import MARK, parse_output
from harness.plan.validate.gate import validation_gate
from harness.plan.validate.guards import resolved_checks
from harness.rundir.validation import read_validation
from harness.schema.validation import ArmValidation, ResolvedArm, resolved_line
from harness.secrets.redact import Redactor

REPO = Path(__file__).resolve().parents[4]
GIB = 1 << 30


def scenario(name: str = "vllm-tiered", **engine: object) -> Scenario:
    data = yaml.safe_load((REPO / "scenarios" / f"{name}.yaml").read_text())
    data["engine"].update(engine)
    return Scenario.model_validate(data)


def engine_fields(**over: object) -> dict[str, Any]:
    fields: dict[str, Any] = {"model": "m", "served_model_name": "llama-3.1-8b", "max_model_len": 32768,
                              "dtype": "bfloat16", "tensor_parallel_size": 1, "pipeline_parallel_size": 1,
                              "data_parallel_size": 1, "gpu_memory_utilization": 0.9, "max_num_seqs": 256,
                              "max_num_batched_tokens": 8192, "enable_prefix_caching": True, "cache_dtype": "auto",
                              "block_size": 128, "user_block_size": False, "kv_offloading_size_gib": None,
                              "kv_offloading_backend": "native", "enable_prompt_tokens_details": True}
    fields.update(over)
    return fields


def offload(spec: str, cpu_bytes: int, *, tiers: list[dict[str, Any]] | None = None, chunks: int | None = None,
            **over: object) -> dict[str, Any]:
    chunk = 2 << 20
    extra: dict[str, Any] = {"spec_name": spec, "cpu_bytes_to_use": cpu_bytes, "eviction_policy": "lru"}
    if tiers:
        extra["secondary_tiers"] = tiers
    out: dict[str, Any] = {"connector": "OffloadingConnector", "role": "kv_both", "extra_config": extra, "spec": spec,
                           "target_block_size": 16, "target_block_source": "vLLM's default", "blocks_per_chunk": 1,
                           "tokens_per_chunk": 16, "chunk_bytes": chunk,
                           "num_chunks": cpu_bytes // chunk if chunks is None else chunks,
                           "cpu_bytes_to_use": cpu_bytes, "eviction_policy": "lru", "tiers": tiers or [],
                           "manager": "CPUOffloadingManager"}
    out.update(over)
    return out


FS_TIER = {"type": "fs", "root_dir": "/kv-tier/0", "n_read_threads": 16, "n_write_threads": 16}


def results(base: dict[str, Any] | None = None, cpu: dict[str, Any] | None = None,
            tiered: dict[str, Any] | None = None,
            engines: dict[str, dict[str, Any]] | None = None) -> list[ArmValidation]:
    engine_over = engines or {}
    arms = {"baseline": {"engine": engine_fields(**engine_over.get("baseline", {})), "offload": base},
            "cpu-32g": {"engine": engine_fields(**engine_over.get("cpu", {})),
                        "offload": cpu or offload("CPUOffloadingSpec", 32 * GIB)},
            "cpu-32g-nvme": {"engine": engine_fields(**engine_over.get("tiered", {})),
                             "offload": tiered or offload("TieringOffloadingSpec", 32 * GIB, tiers=[FS_TIER])}}
    return [ArmValidation(arm=name, status="ok", message="ok", where="w", resolved=ResolvedArm.model_validate(r))
            for name, r in arms.items()]


def errors(items: list[Any]) -> list[str]:
    return [f"{c.arm}: {c.message}" for c in items if c.level == "error"]


def test_shipped_tiered_scenario_resolved_as_planned_passes_with_chunk_figures() -> None:
    items = resolved_checks(scenario(), results())
    assert errors(items) == []
    cpu = [c.message for c in items if c.arm == "cpu-32g" and c.name == "engine-resolved"]
    assert cpu == ["CPUOffloadingSpec: 16384 chunks of 16 tokens (2097152 B (2 MiB) each) at the target GPU's block "
                   "size 16 (vLLM's default); manager CPUOffloadingManager"]


def test_a_gpu_only_baseline_that_resolved_a_cpu_tier_is_refused() -> None:
    # what `--kv-offloading-si 8` in engine.extra_args does: vLLM resolves it for every arm, the baseline included
    got = results(base={"connector": "OffloadingConnector", "extra_config": {"cpu_bytes_to_use": 8.0 * GIB}},
                  engines={"baseline": {"kv_offloading_size_gib": 8.0}})
    (problem,) = [e for e in errors(resolved_checks(scenario(), got)) if e.startswith("baseline")]
    assert "gpu-only arm must resolve to no KV connector" in problem and "kv_offloading_size 8 GiB" in problem
    assert "cpu_bytes_to_use 8589934592" in problem


def test_an_override_of_a_managed_field_is_refused_naming_planned_and_resolved() -> None:
    got = results(engines={"baseline": {"max_model_len": 8192}, "cpu": {"max_model_len": 8192},
                           "tiered": {"max_model_len": 8192}})
    found = errors(resolved_checks(scenario(), got))
    assert len(found) == 3
    assert "max_model_len: vLLM resolved 8192, the harness planned 32768 (engine.max_model_len)" in found[0]


def test_the_cpu_tier_vllm_resolved_must_be_the_planned_one() -> None:
    got = results(cpu=offload("CPUOffloadingSpec", 8 * GIB))
    (problem,) = errors(resolved_checks(scenario(), got))
    assert problem.startswith("cpu-32g: CPU tier: vLLM resolved cpu_bytes_to_use 8589934592, the harness planned "
                              "34359738368")


def test_one_dimension_runs_on_resolved_values() -> None:
    got = results(engines={"tiered": {"cache_dtype": "fp8"}})
    found = [c for c in resolved_checks(scenario(), got) if c.name == "one-dimension-resolved"]
    assert len(found) == 1 and found[0].arm == "cpu-32g-nvme" and "cache_dtype: 'fp8' here, 'auto'" in found[0].message


def test_a_tier_writing_elsewhere_than_the_mounted_disk_is_refused() -> None:
    moved = dict(FS_TIER, root_dir="/elsewhere")
    got = results(tiered=offload("TieringOffloadingSpec", 32 * GIB, tiers=[moved]))
    (problem,) = errors(resolved_checks(scenario(), got))
    assert "vLLM resolved ['/elsewhere'], the harness mounts and checks ['/kv-tier/0']" in problem


def test_zero_chunks_is_a_harness_rule_and_says_so() -> None:
    got = results(cpu=offload("CPUOffloadingSpec", 32 * GIB, chunks=0))
    (problem,) = errors(resolved_checks(scenario(), got))
    assert problem.startswith("cpu-32g: harness rule: the CPU tier") and "accepts this" in problem


def test_resolved_line_names_the_offload_first() -> None:
    line = resolved_line(results()[2])
    assert line is not None and line.startswith("OffloadingConnector / TieringOffloadingSpec: 16384 chunks of 16 "
                                                "tokens (2.00 MiB each) at the target GPU's block size 16")
    assert "fs tier at /kv-tier/0" in line
    assert resolved_line(results()[0]) == ("no KV connector (GPU KV cache only); max_model_len 32768, tp 1, "
                                           "gpu_memory_utilization 0.9, prefix caching on")


def _fake(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!{sys.executable}\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_parse_output_keeps_the_resolved_record_redacted_and_notes_a_forced_platform() -> None:
    out = "\n".join([MARK + json.dumps({"engine_version": "0.32.0",
                                        "platform": {"detected": "UnspecifiedPlatform", "used": "CudaPlatform",
                                                     "forced": True}}),
                     MARK + json.dumps({"arm": "a", "status": "ok", "stage": "engine-config", "message": "built",
                                        "resolved": {"engine": {"model": "/m/hf_secret123", "max_model_len": 4}}})])
    (result,) = parse_output(out, "", ["a"], where="w", redact=Redactor(["hf_secret123"]))
    assert result.resolved is not None and result.resolved.engine.max_model_len == 4
    assert result.resolved.engine.model == "/m/***"
    assert "platform was forced to CudaPlatform" in result.notes[0]


def test_require_validation_stops_an_arm_that_could_not_be_checked(tmp_path: Path) -> None:
    python = _fake(tmp_path, "py", f"import sys\nsys.stdin.read()\nprint({MARK!r} + '{{\"fatal\": \"no vllm\"}}')")
    path = tmp_path / "validation.json"
    opts = ValidateOptions(python=python, model_dir=str(tmp_path))
    items, problem = validation_gate(scenario(), opts, path, require=True, say=lambda _m: None)
    assert problem is not None and problem.startswith("--require-validation: 3 arm(s) could not be validated")
    assert items[0].name == "validation-incomplete" and items[0].message.startswith("NOT VALIDATED: 3 of 3 arm(s)")
    record = read_validation(path)
    assert record is not None and record.state == "incomplete" and "no vllm" in (record.reason or "")
    _, problem = validation_gate(scenario(), opts, path, require=False, say=lambda _m: None)
    assert problem is None


def test_no_validate_is_recorded_and_contradicts_require(tmp_path: Path) -> None:
    path = tmp_path / "validation.json"
    _, problem = validation_gate(scenario(), None, path, require=True, say=lambda _m: None)
    assert problem is not None and "contradict" in problem
    said: list[str] = []
    _, problem = validation_gate(scenario(), None, path, require=False, say=said.append)
    assert problem is None and said[0].startswith("NOT VALIDATED")
    record = read_validation(path)
    assert record is not None and record.state == "skipped"


DOCKER = """import json, os, sys
argv = sys.argv[1:]
with open(os.environ["FAKE_DOCKER_LOG"], "a") as fh:
    fh.write(json.dumps(argv) + "\\n")
if argv[:2] == ["image", "inspect"]:
    sys.exit(0)
if "--gpus" in argv and os.environ.get("FAKE_NO_GPU_RUNTIME"):
    sys.stderr.write('docker: Error response from daemon: could not select device driver "" with capabilities: '
                     '[[gpu]].\\n')
    sys.exit(125)
request = json.load(sys.stdin)
print("KVH-VALIDATE " + json.dumps({"engine_version": "0.32.0"}))
for arm in request["arms"]:
    print("KVH-VALIDATE " + json.dumps({"arm": arm["arm"], "status": "ok", "stage": "engine-config", "message": "ok"}))
"""


def _docker_runs(log: Path) -> list[list[str]]:
    return [a for a in (json.loads(line) for line in log.read_text().splitlines()) if a[:1] == ["run"]]


def test_validation_in_the_pinned_image_gets_the_arms_gpus(tmp_path: Path, monkeypatch: Any) -> None:
    docker = _fake(tmp_path, "docker", DOCKER)
    log = tmp_path / "docker.log"
    monkeypatch.setenv("FAKE_DOCKER_LOG", str(log))
    got = validate_scenario(scenario(), ValidateOptions(docker=docker))
    assert [r.status for r in got] == ["ok", "ok", "ok"]
    (run,) = _docker_runs(log)
    assert run[run.index("--gpus") + 1] == "all" and run.index("--gpus") < run.index("vllm/vllm-openai:v0.32.0")


def test_without_a_gpu_runtime_the_check_runs_without_gpus_and_says_so(tmp_path: Path, monkeypatch: Any) -> None:
    docker = _fake(tmp_path, "docker", DOCKER)
    log = tmp_path / "docker.log"
    monkeypatch.setenv("FAKE_DOCKER_LOG", str(log))
    monkeypatch.setenv("FAKE_NO_GPU_RUNTIME", "1")
    got = validate_scenario(scenario(), ValidateOptions(docker=docker))
    first, second = _docker_runs(log)
    assert "--gpus" in first and "--gpus" not in second
    assert got[0].status == "ok" and "could not give the check the GPUs" in got[0].notes[-1]


def test_plan_items_put_the_loud_line_first(tmp_path: Path) -> None:
    missing = [ArmValidation(arm="baseline", status="not-checked", message="image absent", where="w")]
    items = validation_items(scenario(), missing)
    assert items[0].name == "validation-incomplete" and items[0].level == "warn"


def test_external_servers_are_not_validated_and_the_record_says_why(tmp_path: Path) -> None:
    data = yaml.safe_load((REPO / "scenarios" / "vllm-tiered.yaml").read_text())
    data["engine"].update(launcher="external")
    data["engine"].pop("image", None)
    data["engine"].pop("model_cache_dir", None)
    for i, arm in enumerate(data["arms"]):
        arm["server"] = {"base_url": f"http://127.0.0.1:{18000 + i}"}
    scen = Scenario.model_validate(data)
    assert validate_scenario(scen, ValidateOptions()) == []
    path = tmp_path / "validation.json"
    _, problem = validation_gate(scen, ValidateOptions(), path, require=True, say=lambda _m: None)
    record = read_validation(path)
    assert problem is None and record is not None and record.state == "not-applicable"
    assert record.banner() is None and "live configuration" in (record.reason or "")
