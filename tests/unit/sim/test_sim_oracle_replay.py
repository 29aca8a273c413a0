"""The differential replay's own parts, without vLLM: sequences, the step clock through the simulator, the comparison.

tests/e2e/test_e2e_sim_oracle.py runs the same replays inside vLLM and compares.
"""

from __future__ import annotations

import copy
from pathlib import Path

from harness.sim.blocks import chain_hashes
from tools.sim_oracle.compare import compare, summary
from tools.sim_oracle.replay import ReplayConfig, replay_sim
from tools.sim_oracle.sequence import ReplayRequest, ReplaySequence, from_block_ids, from_token_ids


def test_sequences_key_chunks_by_their_last_block_and_take_gpu_hits_from_the_pool() -> None:
    prompt = list(range(40))
    seq = from_token_ids("t", [("a", prompt, 9), ("b", prompt, 1)], block_tokens=4, blocks_per_chunk=2,
                         gpu_blocks=64, root=7)
    a, b = seq.requests
    hashes = chain_hashes([*prompt, *range(8)], 4, 7)
    assert a.prompt_chunks == 5 and a.chunks[:5] == tuple(hashes[1:10:2])
    assert len(a.chunks) == 6  # 40 prompt + 8 decode tokens: one decode chunk
    assert (a.gpu_blocks, b.gpu_blocks) == (0, 9)  # the last prompt token is always computed
    trace = from_block_ids("m", [("x", [1, 2, 3], 1500, 600), ("y", [1, 2, 9], 1536, 1)], block_tokens=512,
                           blocks_per_chunk=1, gpu_blocks=8)
    x, y = trace.requests
    assert x.prompt_chunks == 2 and len(x.chunks) == 4  # 1500 + 599 tokens: 4 full blocks, 2 of them prompt
    assert y.prompt_chunks == 3 and x.chunks[:2] == y.chunks[:2] and y.chunks[2] != x.chunks[2]
    assert y.gpu_blocks == 2


def toy() -> ReplaySequence:
    shared = (101, 102)
    reqs = (ReplayRequest("r0", (*shared, 1), 3, 0), ReplayRequest("r1", (*shared, 2), 3, 0),
            ReplayRequest("r2", (*shared, 3), 3, 0))
    return ReplaySequence("toy", 16, 1, reqs)


def test_the_step_clock_defers_a_request_whose_chunks_are_still_being_stored() -> None:
    result = replay_sim(toy(), ReplayConfig("lru", capacity_chunks=8, arrivals_per_step=2))
    r0, r1, r2 = result.outcomes
    assert (r0.step, r0.stored) == (0, [101, 102, 1])
    assert (r1.step, r1.stored) == (0, [2])  # same step, before r0's stores: a miss; r0's prefix is pending
    assert (r2.step, r2.defers, r2.hit) == (2, 1, [101, 102])  # arrives at 1: pending, deferred; hits at 2
    assert r2.stored == [3] and result.final["lru"][-2:] == [102, 101]


def test_tiered_replays_cascade_every_store(tmp_path: Path) -> None:
    result = replay_sim(toy(), ReplayConfig("fs", capacity_chunks=8, arrivals_per_step=2, tiered=True), tmp_path)
    assert [o.cascaded for o in result.outcomes] == [o.stored for o in result.outcomes]
    assert result.final["fs"] == sorted({1, 2, 3, 101, 102})


def test_the_comparison_names_every_difference_and_counts_what_it_compared() -> None:
    ours = replay_sim(toy(), ReplayConfig("lru", capacity_chunks=8, arrivals_per_step=2))
    same = compare(ours, copy.deepcopy(ours))
    assert not same.differences and (same.requests, same.hits, same.stored, same.defers) == (3, 2, 5, 1)
    theirs = copy.deepcopy(ours)
    theirs.outcomes[2].hit = [101]
    theirs.final["lru"] = list(reversed(theirs.final["lru"]))
    found = compare(ours, theirs)
    assert [(d.request, d.field) for d in found.differences] == [("r2", "hit"), ("*", "final.lru")]
    assert "compared 6 requests in 2 runs" in summary([same, found]) and "2 differences" in summary([same, found])
