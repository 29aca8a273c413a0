"""The built-in hardware profiles: listed, loadable, and each number equal to the derivation its YAML comment gives.

The derivations below restate the profiles' comments (datasheet peaks, config.json geometry, published kernel
efficiencies, the vLLM blog's DMA measurements), so a typo in a YAML file, or a number changed without its source,
fails here.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from harness.sim.cli import sim_app
from harness.sim.config import build_engine_config
from harness.sim.profile import builtin_profile_names, load_profile

NEW = ("h100-llama3-8b", "h100-llama3-70b-fp8", "h200-llama3-70b-fp8", "h200-qwen3-32b", "a100-pcie-llama3-8b")

# (layers, KV heads, head_dim, KV bytes per token, GPU blocks of 16, max_model_len): config.json geometry and the
# capacity each YAML comment states.
GEOMETRY = {
    "h100-llama3-8b": (32, 8, 128, 131072, 27763, 131072),
    "h100-llama3-70b-fp8": (80, 8, 128, 327680, 558, 8192),
    "h200-llama3-70b-fp8": (80, 8, 128, 327680, 11756, 131072),
    "h200-qwen3-32b": (64, 8, 128, 262144, 16086, 40960),
    "a100-pcie-llama3-8b": (32, 8, 128, 131072, 27925, 131072),
}

LLAMA8_GEMM = 2 * (8_030_261_248 - 2 * 128256 * 4096)  # non-embedding FLOPs per prefill token
LLAMA8_LM_HEAD = 2 * 128256 * 4096
LLAMA70_GEMM = 2 * (70_553_706_496 - 2 * 128256 * 8192)
LLAMA70_LM_HEAD = 2 * 128256 * 8192
QWEN32_GEMM = 2 * 64 * (5120 * 8192 + 2 * 5120 * 1024 + 8192 * 5120 + 3 * 5120 * 25600 + 2 * 5120 + 2 * 128)
QWEN32_LM_HEAD = 2 * 151936 * 5120
HOPPER_BF16_GEMM = 736e12  # tilelang benchmark/matmul, 8192 x 8192 x 4096, H800 SXM
HOPPER_FP8_GEMM = 1461e12  # tilelang benchmark/matmul_fp8, 8192 x 8192 x 8192, H800 SXM
HOPPER_FA3 = 620.73e12  # FlashAttention-3, head_dim 128, 16k, H100 (pytorch/benchmark ff65cb6)
A100_GEMM, A100_FA2 = 312e12 * 0.80, 312e12 * 0.50  # FA2 paper: GEMM "up to 80-90%", FA2 "50-73%" (low ends)

# profile: (GEMM FLOPs/token, GEMM FLOP/s, lm_head FLOPs, lm_head FLOP/s, attention FLOPs/pair, attention FLOP/s,
#           weight bytes, HBM bytes/s)
COMPUTE = {
    "h100-llama3-8b": (LLAMA8_GEMM, HOPPER_BF16_GEMM, LLAMA8_LM_HEAD, HOPPER_BF16_GEMM, 4 * 32 * 128 * 32,
                       HOPPER_FA3, 16_060_522_496, 3.35e12),
    "h100-llama3-70b-fp8": (LLAMA70_GEMM, HOPPER_FP8_GEMM, LLAMA70_LM_HEAD, HOPPER_BF16_GEMM, 4 * 64 * 128 * 80,
                            HOPPER_FA3, 72_700_000_000, 3.35e12),
    "h200-llama3-70b-fp8": (LLAMA70_GEMM, HOPPER_FP8_GEMM, LLAMA70_LM_HEAD, HOPPER_BF16_GEMM, 4 * 64 * 128 * 80,
                            HOPPER_FA3, 72_700_000_000, 4.8e12),
    "h200-qwen3-32b": (QWEN32_GEMM, HOPPER_BF16_GEMM, QWEN32_LM_HEAD, HOPPER_BF16_GEMM, 4 * 64 * 128 * 64,
                       HOPPER_FA3, 65_524_246_528, 4.8e12),
    "a100-pcie-llama3-8b": (LLAMA8_GEMM, A100_GEMM, LLAMA8_LM_HEAD, A100_GEMM, 4 * 32 * 128 * 32, A100_FA2,
                            16_060_522_496, 1.935e12),
}
HBM_EFFICIENCY = 0.75  # the assumption every profile states


def test_new_profiles_are_built_in_and_listed() -> None:
    assert set(NEW) <= set(builtin_profile_names())
    result = CliRunner().invoke(sim_app, ["profiles"])
    assert result.exit_code == 0
    listed = {line.split(":", 1)[0] for line in result.stdout.splitlines() if ":" in line}
    assert set(builtin_profile_names()) <= listed


@pytest.mark.parametrize("name", NEW)
def test_geometry_and_capacity_match_config_json(name: str) -> None:
    layers, kv_heads, head_dim, per_token, blocks, max_len = GEOMETRY[name]
    p = load_profile(name)
    assert (p.model.num_layers, p.model.num_kv_heads, p.model.head_dim, p.model.kv_dtype_bytes) == (
        layers, kv_heads, head_dim, 2)
    assert p.model.kv_bytes_per_token == per_token == 2 * layers * kv_heads * head_dim * 2
    cfg = build_engine_config(p)  # vLLM's start-up check: max_model_len fits the GPU KV cache
    assert (cfg.num_gpu_blocks, cfg.block_size, cfg.max_model_len) == (blocks, 16, max_len)
    assert p.gpu.gpu_memory_utilization == 0.9  # vLLM default
    assert (p.scheduler.max_num_seqs, p.scheduler.max_num_batched_tokens) == (1024, 8192)  # >= 70 GiB defaults


@pytest.mark.parametrize("name", NEW)
def test_step_coefficients_follow_their_stated_derivation(name: str) -> None:
    gemm, gemm_rate, lm_head, lm_rate, pair, att_rate, weights, hbm = COMPUTE[name]
    p = load_profile(name)
    c = p.compute
    kv = p.model.kv_bytes_per_token
    assert p.gpu.weights_bytes == weights
    expected = {
        "step_overhead_s": weights / (hbm * HBM_EFFICIENCY),
        "prefill_s_per_token": gemm / gemm_rate,
        "prefill_s_per_token_ctx": pair / att_rate,
        "decode_s_per_seq": gemm / gemm_rate + lm_head / lm_rate,
        "decode_s_per_ctx_token": kv / (hbm * HBM_EFFICIENCY),
    }
    for field, value in expected.items():
        assert getattr(c, field) == pytest.approx(value, rel=0.01), field


def test_link_figures_match_their_sources() -> None:
    """vLLM blog 2026-01-08 (Figures 3/4, H100, PCIe Gen5): DMA "up to about 50GB/s" one way; PCIe Gen4 carries
    half of Gen5's 63.0 GB/s raw."""
    for name in ("h100-llama3-8b", "h100-llama3-70b-fp8", "h200-llama3-70b-fp8", "h200-qwen3-32b", "h200-llama3-8b",
                 "demo"):
        link = load_profile(name).link
        assert 45e9 <= link.d2h_bytes_per_s <= link.h2d_bytes_per_s <= 51e9, name
    gen4 = load_profile("a100-pcie-llama3-8b").link
    gen5 = load_profile("h100-llama3-8b").link  # the same 2 MiB block: the same DMA efficiency, half the lanes' rate
    assert gen4.h2d_bytes_per_s == pytest.approx(gen5.h2d_bytes_per_s / 2, rel=0.01)
    assert gen4.d2h_bytes_per_s == pytest.approx(gen5.d2h_bytes_per_s / 2, rel=0.01)


def test_h100_70b_fp8_shares_the_demo_memory_budget() -> None:
    demo, new = load_profile("demo"), load_profile("h100-llama3-70b-fp8")
    assert demo.gpu == new.gpu.model_copy(update={"name": demo.gpu.name}) and demo.model == new.model
    assert build_engine_config(demo).num_gpu_blocks == build_engine_config(new).num_gpu_blocks == 558
    # measured kernel efficiencies make prefill about twice as fast as demo.yaml's assumed 35% FP8 MFU
    assert 1.8 < demo.compute.prefill_s_per_token / new.compute.prefill_s_per_token < 2.4
