"""What a CPU tier no larger than the GPU's KV cache can and cannot add (vLLM 0.32 semantics, see offload.py).

Cannot: with requests one at a time, a working set the GPU cache already holds gets nothing from the CPU tier, and a
cycle of prefixes the GPU cannot hold gets nothing from a CPU tier no larger than the full blocks the GPU caches.

Can: (1) the GPU spends a block per request on its partial last block, the CPU tier stores full chunks only, so a
tier of the GPU's size in blocks holds more prefixes; (2) running requests take the GPU's blocks and it evicts cached
prefix blocks to make room, while the CPU tier's copies stay; (3) the GPU prefix cache never serves the last block of
a block-aligned prompt (its last token must be computed) but an external hit may, and the last token is recomputed.
"""

from __future__ import annotations

from sim_unit_helpers import drive, make_cfg

from harness.sim.scheduler import EngineCore

GPU_BLOCKS = 16


def cycle(cpu_chunks: int, n_prompts: int = 6) -> tuple[int, int]:
    """13-token prompts (3 full blocks + 1 token: 4 GPU blocks each) cycled four times, one request at a time;
    returns (GPU-hit tokens, CPU-hit tokens) of the last three cycles."""
    core = EngineCore(make_cfg(GPU_BLOCKS, cpu_chunks=cpu_chunks))
    prompts = [list(range(i * 100, i * 100 + 13)) for i in range(n_prompts)]
    now = 0.0
    gpu = cpu = 0
    for turn in range(4):
        for i, prompt in enumerate(prompts):
            req = core.new_request(f"r{turn}-{i}", prompt, 1, 0, now)
            core.add(req)
            now = drive(core, now)
            if turn:
                gpu += req.gpu_hit_tokens
                cpu += req.cpu_hit_tokens
    return gpu, cpu


def test_one_request_at_a_time_a_tier_no_larger_than_what_the_gpu_caches_adds_nothing() -> None:
    assert cycle(cpu_chunks=GPU_BLOCKS, n_prompts=3) == (3 * 3 * 12, 0)  # the GPU holds the working set
    # six prompts: 24 GPU blocks; the GPU caches 4 requests' 12 full blocks, and misses every prompt
    assert cycle(cpu_chunks=12) == (0, 0)
    assert cycle(cpu_chunks=8) == (0, 0)


def test_a_tier_of_the_gpus_size_holds_the_prefixes_the_gpu_spends_on_partial_blocks() -> None:
    gpu, cpu = cycle(cpu_chunks=GPU_BLOCKS)
    assert gpu == 0 and 0 < cpu < 3 * 6 * 12  # the heads of prefixes (a request's tail is evicted first)
    assert cycle(cpu_chunks=18) == (0, 3 * 6 * 12)  # a tier the cycle's size serves all of it


def test_a_tier_of_the_gpus_size_adds_hits_when_running_requests_take_the_gpu() -> None:
    core = EngineCore(make_cfg(GPU_BLOCKS, cpu_chunks=GPU_BLOCKS))
    prefix = list(range(9000, 9008))
    core.add(core.new_request("p", [*prefix, 1, 2, 3, 4, 5], 1, 0, 0.0))
    now = drive(core)
    for i in range(4):  # four requests at once need all 16 GPU blocks: the cached prefix is evicted
        core.add(core.new_request(f"long{i}", list(range(i * 100, i * 100 + 15)), 2, 0, now))
    now = drive(core, now)
    again = core.new_request("q", [*prefix, 7, 8, 9, 10, 11], 1, 0, now)
    core.add(again)
    drive(core, now)
    assert again.gpu_hit_tokens == 0 and again.cpu_hit_tokens == 8


def test_an_external_hit_serves_the_last_block_of_an_aligned_prompt_the_gpu_cannot() -> None:
    core = EngineCore(make_cfg(64, cpu_chunks=3))  # a tier of one prompt, a GPU of 64 blocks
    prompt = list(range(12))  # 3 full blocks: the GPU may hit 2 (the last token must be computed)
    core.add(core.new_request("a", prompt, 1, 0, 0.0))
    now = drive(core)
    again = core.new_request("b", prompt, 1, 0, now)
    core.add(again)
    drive(core, now)
    assert (again.gpu_hit_tokens, again.cpu_hit_tokens, again.recomputed_tokens) == (8, 4, 0)
