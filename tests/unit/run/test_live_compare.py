"""The one-dimension guard on live servers: findings from what a server reports against what the arm declares."""

from __future__ import annotations

from typing import Any

from harness.config.arms import Arm
from harness.config.engine import EngineSpec
from harness.decision.live_config import overview
from harness.run.live_compare import compare, refusal
from harness.run.live_config import LiveConfig, read_vllm_metrics

ENGINE = EngineSpec(kind="vllm", launcher="external", model="meta-llama/Llama-3.1-8B-Instruct",
                    served_model_name="m8b", gpu_memory_utilization=0.9, max_model_len=8192)
MODELS = [{"id": "m8b", "root": "meta-llama/Llama-3.1-8B-Instruct", "max_model_len": 8192}]


def _exposition(size: str = "None", extra: str = "", **labels: str) -> str:
    cc = {"block_size": "16", "cache_dtype": "auto", "enable_prefix_caching": "True",
          "gpu_memory_utilization": "0.9", "kv_offloading_backend": "native", "kv_offloading_size": size,
          "num_gpu_blocks": "1000", **labels}
    body = ",".join(f'{k}="{v}"' for k, v in cc.items())
    return ("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
            "# TYPE vllm:cache_config_info gauge\n"
            f'vllm:cache_config_info{{engine="0",{body}}} 1.0\n' + extra)


def _live(text: str, models: list[dict[str, Any]] | None = None) -> LiveConfig:
    live = LiveConfig(flavor="vllm", models=MODELS if models is None else models)
    read_vllm_metrics(text, live)
    return live


def _arm(offload: dict[str, Any] | None = None, tier: str = "cpu") -> Arm:
    return Arm.model_validate({"name": "cpu-16g", "tier": tier, "offload": offload or {"kind": "none"}})


NATIVE16 = {"kind": "vllm-native", "kv_offloading_size_gib": 16}
OFFLOAD_SERIES = ("# TYPE vllm:kv_offload_store_bytes counter\n"
                  'vllm:kv_offload_store_bytes_total{engine="0"} 0.0\n')


def test_cpu_tier_of_another_size_is_refused_with_both_values() -> None:
    findings = compare(_arm(NATIVE16), ENGINE, _live(_exposition("8")), {})
    assert refusal("cpu-16g", findings) == ("arm cpu-16g: declared CPU tier 16 GiB, the live server reports 8 GiB "
                                            "(vllm:cache_config_info kv_offloading_size=8)")


def test_matching_server_is_verified_field_by_field() -> None:
    findings = compare(_arm(NATIVE16), ENGINE, _live(_exposition("16.0")), {})
    assert refusal("cpu-16g", findings) is None
    text = overview(findings)
    for part in ("CPU tier 16 GiB", "served model m8b", "prefix caching True", "GPU memory utilization 0.9",
                 "max_model_len 8192"):
        assert part in text


def test_baseline_whose_server_has_an_offload_connector_is_refused() -> None:
    arm = _arm(tier="gpu-only")
    assert refusal("b", compare(arm, ENGINE, _live(_exposition("4")), {})) is not None
    why = refusal("b", compare(arm, ENGINE, _live(_exposition(extra=OFFLOAD_SERIES)), {}))
    assert why is not None and "declared CPU tier none, the live server reports an offload connector" in why


def test_connector_size_is_said_to_be_unverifiable_not_matched() -> None:
    arm = _arm({"kind": "vllm-connector", "cpu_bytes_to_use": 16 << 30})
    findings = compare(arm, ENGINE, _live(_exposition(extra=OFFLOAD_SERIES)), {})
    tier = next(f for f in findings if f.field == "CPU tier")
    assert tier.status == "unverified" and "not exposed" in tier.source
    assert refusal("cpu-16g", findings) is None
    assert "not verifiable" in overview(findings)


def test_other_settings_than_the_tier_are_refused() -> None:
    live = _live(_exposition("16", enable_prefix_caching="False", gpu_memory_utilization="0.8"),
                 models=[{"id": "m8b", "root": "other/model", "max_model_len": 4096}])
    why = refusal("cpu-16g", compare(_arm(NATIVE16), ENGINE, live, {}))
    assert why is not None
    for part in ("declared prefix caching True, the live server reports False",
                 "declared GPU memory utilization 0.9, the live server reports 0.8",
                 "declared model meta-llama/Llama-3.1-8B-Instruct, the live server reports other/model",
                 "declared max_model_len 8192, the live server reports 4096"):
        assert part in why


def test_missing_served_model_and_block_size_against_the_baseline() -> None:
    base = _live(_exposition())
    live = _live(_exposition("16", block_size="32"), models=[{"id": "other"}])
    why = refusal("cpu-16g", compare(_arm(NATIVE16), ENGINE, live, {"baseline": base}))
    assert why is not None
    assert "declared served model m8b, the live server reports other" in why
    assert "declared block size 16 (as baseline's server), the live server reports 32" in why


def test_tensorrt_llm_tier_cannot_be_verified_and_says_so() -> None:
    engine = EngineSpec(kind="trtllm", launcher="external", model=MODELS[0]["root"], served_model_name="m8b")
    arm = Arm.model_validate({"name": "cpu", "tier": "cpu", "offload": {"kind": "trtllm", "host_cache_size": 1 << 30}})
    findings = compare(arm, engine, LiveConfig(flavor="trtllm", models=MODELS), {})
    assert refusal("cpu", findings) is None
    tier = next(f for f in findings if f.field.startswith("CPU tier"))
    assert tier.status == "unverified" and "no configuration endpoint" in tier.source


def test_server_without_cache_config_info_is_unverified() -> None:
    live = _live("# TYPE x gauge\nx 1.0\n")
    findings = compare(_arm(NATIVE16), ENGINE, live, {})
    assert refusal("cpu-16g", findings) is None
    assert any(f.status == "unverified" and "cache configuration" in f.field for f in findings)
