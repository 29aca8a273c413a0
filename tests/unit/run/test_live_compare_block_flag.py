"""The live guard reads ``--block-size`` from extra_args as vLLM's parser does (underscores, abbreviations, last
repeat wins), and compares memory fractions without rounding them."""

from __future__ import annotations

from harness.config.engine import EngineSpec
from harness.run.live_compare import _block_flag


def engine(*extra: str) -> EngineSpec:
    return EngineSpec(kind="vllm", model="m", image="vllm/vllm-openai:v0.32.0", extra_args=list(extra))


def test_block_size_as_vllm_reads_it() -> None:
    assert _block_flag(engine("--block-size", "32")) == "32"
    assert _block_flag(engine("--block_size=64")) == "64"
    assert _block_flag(engine("--block-si", "16", "--block-size", "32")) == "32"
    assert _block_flag(engine("--enforce-eager")) is None
