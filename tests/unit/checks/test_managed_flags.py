"""``engine.extra_args`` may not override a flag the harness renders (check ``extra-args``: plan/checks/flags.py).

vLLM reads ``_`` as ``-``, accepts abbreviations and aliases and keeps the last repeat; every spelling that reaches a
managed flag is an error naming the flag and the scenario field to use instead. tests/e2e/test_e2e_managed_flags.py
checks the same table and abbreviations against vLLM 0.32's own parser.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from harness.config.arms import Arm
from harness.config.engine import EngineSpec
from harness.config.scenario import Scenario
from harness.engines.trtllm import serve_args
from harness.engines.trtllm_versions import release_for, releases
from harness.engines.vllm import MANAGED_BY_OPTION, MANAGED_FLAGS, engine_args, offload_args
from harness.plan.checks import ALL_CHECKS
from harness.plan.checks.flags import TRTLLM_MANAGED, check_managed_flags, is_flag, resolve_vllm
from harness.schema.summary import CheckItem

GIB = 1 << 30
_WORKLOAD: dict[str, Any] = {"classes": [{"name": "short", "weight": 1, "prompt_tokens": {"min": 10, "max": 100},
                                          "output_tokens": {"min": 5, "max": 50}}]}
_STEPS: dict[str, Any] = {"levels": [{"concurrency": 2, "duration_s": 10}]}
BASES: dict[str, dict[str, Any]] = {
    "vllm": {"name": "t", "engine": {"kind": "vllm", "image": "vllm/vllm-openai:v0.32.0", "model": "m",
                                     "max_model_len": 32768},
             "arms": [{"name": "baseline", "tier": "gpu-only"},
                      {"name": "cpu", "tier": "cpu", "offload": {"kind": "vllm-native", "kv_offloading_size_gib": 4}}],
             "workload": _WORKLOAD, "steps": _STEPS},
    "trtllm": {"name": "t", "engine": {"kind": "trtllm", "image": "nvcr.io/nvidia/tensorrt-llm/release:1.0.0",
                                       "model": "m"},
               "arms": [{"name": "baseline", "tier": "gpu-only", "offload": {"kind": "trtllm"}},
                        {"name": "host", "tier": "cpu", "offload": {"kind": "trtllm", "host_cache_size": 4 * GIB}}],
               "workload": _WORKLOAD, "steps": _STEPS},
    "sim": {"name": "t", "engine": {"kind": "sim", "model": "m"},
            "arms": [{"name": "baseline", "tier": "gpu-only"},
                     {"name": "cpu", "tier": "cpu", "offload": {"kind": "vllm-native", "kv_offloading_size_gib": 4}}],
            "workload": _WORKLOAD, "steps": _STEPS},
}


def scenario(kind: str = "vllm", extra: list[str] | None = None, arm_extra: dict[int, list[str]] | None = None
             ) -> Scenario:
    data = copy.deepcopy(BASES[kind])
    if extra is not None:
        data["engine"]["extra_args"] = extra
    for index, args in (arm_extra or {}).items():
        data["arms"][index]["engine"] = {"extra_args": args}
    return Scenario.model_validate(data)


def errors_of(s: Scenario) -> list[str]:
    items = check_managed_flags(s)
    assert all(i.name == "extra-args" for i in items)
    return [i.message for i in items if i.level == "error"]


def only_error(s: Scenario) -> str:
    [message] = errors_of(s)
    return message


# --- vLLM: every spelling of a managed flag --------------------------------------------------------------------------

def test_abbreviated_offload_flag_in_engine_extra_args_names_the_flag_and_the_baseline() -> None:
    message = only_error(scenario(extra=["--kv-offloading-si", "8"]))
    assert message == (
        'engine.extra_args: "--kv-offloading-si" is an abbreviation of --kv-offloading-size, which the harness sets '
        "from arms[].offload (vLLM accepts abbreviations and the last repeat wins, so it would change every arm's "
        "offload, the gpu-only baseline included); remove it and set the tier in arms[].offload")


def test_underscore_spelling_with_a_value() -> None:
    message = only_error(scenario(extra=["--max_model_len=8192"]))
    assert message.startswith('engine.extra_args: "--max_model_len" is --max-model-len spelled with underscores, '
                              "which the harness sets from engine.max_model_len (vLLM reads _ as -")
    assert message.endswith("remove it and set engine.max_model_len")
    assert "8192" not in message  # values are never echoed (they may be secrets)


def test_abbreviation_of_max_model_len() -> None:
    message = only_error(scenario(extra=["--max-model", "8192"]))
    assert '"--max-model" is an abbreviation of --max-model-len' in message
    assert "engine.max_model_len" in message


def test_short_alias_tp() -> None:
    message = only_error(scenario(extra=["-tp", "2"]))
    assert message.startswith('engine.extra_args: "-tp" is vLLM\'s alias of --tensor-parallel-size, which the harness '
                              "sets from engine.tensor_parallel_size")
    assert "-tp=2" not in message
    assert only_error(scenario(extra=["-tp=2"])) == message


def test_long_alias_and_its_abbreviation() -> None:
    assert "vLLM's alias of --gpu-memory-utilization" in only_error(
        scenario(extra=["--device-memory-utilization", "0.5"]))
    message = only_error(scenario(extra=["--device-mem=0.5"]))
    assert ('"--device-mem" is an abbreviation of --device-memory-utilization (vLLM\'s alias of '
            "--gpu-memory-utilization)") in message
    assert "engine.gpu_memory_utilization" in message


def test_negation_of_prefix_caching_when_the_harness_enables_it() -> None:
    s = scenario(extra=["--no-enable-prefix-caching"])
    assert s.engine.enable_prefix_caching
    assert "--enable-prefix-caching" in engine_args(s.engine, 8000, "127.0.0.1")
    message = only_error(s)
    assert message.startswith('engine.extra_args: "--no-enable-prefix-caching" is the negation of '
                              "--enable-prefix-caching, which the harness sets from engine.enable_prefix_caching")
    assert message.endswith("set engine.enable_prefix_caching")
    assert "abbreviation of --no-enable-prefix-caching (the negation of --enable-prefix-caching)" in only_error(
        scenario(extra=["--no-enable-prefix"]))


def test_prompt_tokens_details_has_no_field_and_says_why() -> None:
    message = only_error(scenario(extra=["--no-enable-prompt-tokens-details"]))
    assert "the negation of --enable-prompt-tokens-details" in message
    assert "usage.prompt_tokens_details.cached_tokens" in message


def test_dotted_json_form_of_the_transfer_config() -> None:
    message = only_error(scenario(extra=["--kv-transfer-config.kv_connector", "LMCacheConnectorV1"]))
    assert "sets a key of --kv-transfer-config (vLLM's dotted JSON form)" in message
    assert "the gpu-only baseline included" in message and "LMCacheConnectorV1" not in message


def test_ambiguous_abbreviation_of_managed_flags() -> None:
    message = only_error(scenario(extra=["--max-num", "4"]))
    assert ('"--max-num" is an ambiguous abbreviation of --max-num-seqs and --max-num-batched-tokens' in message)
    assert "engine.max_num_seqs and engine.max_num_batched_tokens" in message
    assert "vLLM refuses an ambiguous abbreviation" in message


@pytest.mark.parametrize("token", ["--model", "--host", "--port=1", "--served-model-name", "--max-num-seqs",
                                   "--max-num-batched", "--kv-offloading-backend", "--kv-transfer-config",
                                   "--gpu_memory_utilization", "--tensor-parallel", "-t"])
def test_every_managed_flag_is_refused(token: str) -> None:
    assert len(errors_of(scenario(extra=[token, "x"]))) == 1


def test_config_file_is_refused_with_the_reason() -> None:
    message = only_error(scenario(extra=["--config", "x.yaml"]))
    assert message.startswith('engine.extra_args: "--config" is refused: vLLM reads a YAML file of arguments')
    assert "can set any flag" in message and "x.yaml" not in message
    assert len(errors_of(scenario(extra=["--config=x.yaml"]))) == 1


def test_repeated_unmanaged_flag() -> None:
    message = only_error(scenario(extra=["--seed", "1", "--enforce-eager", "--seed=2"]))
    assert message == ('engine.extra_args: --seed is given 2 times ("--seed" and "--seed=..."); vLLM keeps the last '
                       "and silently drops the earlier; keep one")


def test_repeats_count_underscores_and_negations_as_the_same_flag() -> None:
    assert "--enforce-eager is given 2 times" in only_error(
        scenario(extra=["--enforce_eager", "--no-enforce-eager"]))
    assert "is given 2 times" in only_error(scenario(extra=["--compilation-config.mode", "1",
                                                            "--compilation-config.mode", "2"]))
    assert errors_of(scenario(extra=["--compilation-config.mode", "1", "--compilation-config.level", "2"])) == []
    assert errors_of(scenario(extra=["--json-arg.items+", "a", "--json-arg.items+", "b"])) == []


def test_a_repeated_managed_flag_names_the_flag_and_the_repeat() -> None:
    found = errors_of(scenario(extra=["-tp", "2", "--tensor-parallel-size", "4"]))
    assert len(found) == 3
    assert "--tensor-parallel-size is given 2 times" in found[2]


@pytest.mark.parametrize("extra", [["--enforce-eager"], ["--seed", "1"], ["--seed", "-1"], ["--enforce-eager",
                                   "--seed=1", "--max-num-partial-prefills", "2", "--model-impl", "vllm",
                                   "--config-format", "auto", "--kv-cache-dtype", "fp8", "--block-size", "16"]])
def test_harmless_extra_args_pass(extra: list[str]) -> None:
    items = check_managed_flags(scenario(extra=extra))
    assert [(i.name, i.level) for i in items] == [("extra-args", "ok")]


# --- arms[i].engine.extra_args ---------------------------------------------------------------------------------------

def test_offload_flag_in_an_arm_override_names_the_arm() -> None:
    message = only_error(scenario(arm_extra={1: ["--kv_offloading_size", "9"]}))
    assert message.startswith('arms[1].engine.extra_args: "--kv_offloading_size" is --kv-offloading-size spelled '
                              "with underscores")
    assert "override the offload of arm 'cpu' set in arms[1].offload" in message
    assert message.endswith("set the tier in arms[1].offload")


def test_offload_flag_in_the_baseline_arm_override() -> None:
    message = only_error(scenario(arm_extra={0: ["--kv-offloading-si", "8"]}))
    assert message.startswith('arms[0].engine.extra_args: "--kv-offloading-si" is an abbreviation of '
                              "--kv-offloading-size")
    assert "the gpu-only baseline" in message


def test_arm_overrides_are_checked_like_the_engine() -> None:
    found = errors_of(scenario(extra=["--seed", "1"], arm_extra={1: ["--max-model", "8192", "--config", "c.yaml",
                                                                     "--seed", "2", "--seed", "3"]}))
    assert [m.split(":", 1)[0] for m in found] == ["arms[1].engine.extra_args"] * 3
    assert "--max-model-len" in found[0] and '"--config" is refused' in found[1] and "--seed is given 2" in found[2]


# --- TensorRT-LLM and the simulator ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("token", "field"), [("--max_seq_len", "engine.max_model_len"),
                                              ("--tp_size=2", "engine.tensor_parallel_size"),
                                              ("--max_batch_size", "engine.max_num_seqs"),
                                              ("--max_num_tokens", "engine.max_num_batched_tokens"),
                                              ("--host", "engine.host"), ("--port", "engine.port")])
def test_trtllm_managed_flag_names_the_field(token: str, field: str) -> None:
    message = only_error(scenario("trtllm", extra=[token, "1"]))
    written = token.split("=", maxsplit=1)[0]
    assert message.startswith(f'engine.extra_args: "{written}" is a trtllm-serve flag the harness renders itself '
                              f"from {field}")
    assert message.endswith(f"remove it and set {field}")


def test_trtllm_config_flag_and_backend() -> None:
    message = only_error(scenario("trtllm", extra=["--extra_llm_api_options", "mine.yaml"]))
    assert "extra-options YAML written per arm" in message and "arms[].offload (kind trtllm)" in message
    assert "pytorch backend" in only_error(scenario("trtllm", extra=["--backend", "tensorrt"]))
    assert "--log_level is given 2 times" in only_error(scenario("trtllm", extra=["--log_level", "info",
                                                                               "--log_level=debug"]))
    assert errors_of(scenario("trtllm", extra=["--log_level", "info", "--trust_remote_code"])) == []
    assert "arms[].offload.free_gpu_memory_fraction" in only_error(
        scenario("trtllm", extra=["--kv_cache_free_gpu_memory_fraction", "0.5"]))
    # trtllm-serve (click) takes no abbreviations: a prefix is an unknown flag, which trtllm.py refuses on its own
    assert errors_of(scenario("trtllm", extra=["--max_seq", "8"])) == []


def test_trtllm_table_covers_what_the_adapter_renders() -> None:
    engine = EngineSpec(kind="trtllm", model="m", image="nvcr.io/nvidia/tensorrt-llm/release:1.0.0",
                        max_model_len=4096, max_num_seqs=8, max_num_batched_tokens=2048, tensor_parallel_size=2)
    rendered = {a.split("=")[0] for a in serve_args(engine, release_for(engine)[0], 8000, "127.0.0.1")
                if a.startswith("-")}
    assert rendered <= set(TRTLLM_MANAGED), rendered - set(TRTLLM_MANAGED)
    assert {r.config_flag for r in releases()} <= set(TRTLLM_MANAGED)


def test_simulator_checks_offload_flags_and_repeats() -> None:
    assert "the gpu-only baseline included" in only_error(scenario("sim", extra=["--kv-offloading-size", "8"]))
    assert "is given 2 times" in only_error(scenario("sim", extra=["--seed", "1", "--seed", "2"]))
    assert errors_of(scenario("sim", extra=["--seed", "1"])) == []


# --- the table itself ------------------------------------------------------------------------------------------------

def test_the_table_covers_every_flag_the_vllm_adapter_renders() -> None:
    engine = EngineSpec(kind="vllm", model="m", image="vllm/vllm-openai:v0.32.0", served_model_name="s",
                        max_model_len=4096, max_num_seqs=8, max_num_batched_tokens=2048)
    arms = [Arm.model_validate({"name": "c", "tier": "cpu", "offload": {"kind": "vllm-native",
                                                                        "kv_offloading_size_gib": 1}}),
            Arm.model_validate({"name": "k", "tier": "cpu", "offload": {"kind": "vllm-connector",
                                                                        "cpu_bytes_to_use": GIB}})]
    rendered = {a for a in engine_args(engine, 8000, "127.0.0.1") if a.startswith("-")}
    rendered |= {a for a in engine_args(engine.model_copy(update={"enable_prefix_caching": False}), 1, "h")
                 if a.startswith("-")}
    for arm in arms:
        rendered |= {a for a in offload_args(arm) if a.startswith("-")}
    assert rendered <= set(MANAGED_BY_OPTION), rendered - set(MANAGED_BY_OPTION)
    assert {f.dest for f in MANAGED_FLAGS} >= {"model", "config", "kv_offloading_size", "tensor_parallel_size"}
    for flag in MANAGED_FLAGS:
        assert flag.field or flag.note, flag.dest


def test_resolution_details() -> None:
    assert resolve_vllm("--enforce-eager") is None
    assert resolve_vllm("value") is None and resolve_vllm("-1") is None and resolve_vllm("--") is None
    assert not is_flag("-0.5") and is_flag("-tp")
    res = resolve_vllm("--kv-offloading-si=8")
    assert res is not None and res.how == "abbreviation" and res.flag.dest == "kv_offloading_size"
    res = resolve_vllm("--max_num")
    assert res is not None and res.how == "ambiguous" and len(res.flags) == 2


def test_the_check_runs_in_plan_and_lists_every_problem() -> None:
    items: list[CheckItem] = ALL_CHECKS["extra-args"](scenario(extra=["--kv-offloading-si", "8", "--max-model-len",
                                                                      "8192"]), None, "plan", False)  # type: ignore[arg-type]
    assert [i.level for i in items] == ["error", "error"]
    assert "--kv-offloading-size" in items[0].message and "engine.max_model_len" in items[1].message


def test_weight_offload_is_found_by_vllms_spelling_and_abbreviation() -> None:
    from harness.plan.checks.engine import check_weight_offload

    for token in ("--cpu-offload-gb", "--cpu_offload_gb=4", "--cpu-offload-g"):
        data = scenario("vllm", extra=[token, "4"] if "=" not in token else [token])
        (item,) = check_weight_offload(data)
        assert item.level == "error" and "model WEIGHTS" in item.message, token
    (item,) = check_weight_offload(scenario("vllm", extra=["--enforce-eager"]))
    assert item.level == "ok"
