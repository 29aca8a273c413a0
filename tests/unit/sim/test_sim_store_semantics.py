"""Stores, lookups and promotions as vLLM 0.32's offloading connector makes them (tests/e2e/test_e2e_sim_oracle.py
holds the same code against vLLM's own managers).

A chunk is loadable only after its store completes (a request finding it pending waits); ``offload_prompt_only``;
``store_threshold``; an offer is stored whole or not at all and is made again next step; a hit may cover the whole
prompt (the last token is recomputed); tiered stores write through to disk; disk hits are promoted into the CPU tier
first, and a disk hit longer than the CPU tier never loads.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from sim_unit_helpers import drive, make_cfg

from harness.sim.config import ConfigError, EngineConfig, parse_kv_transfer_config
from harness.sim.offload import FS, ExternalHit
from harness.sim.request import ReqState, SimRequest
from harness.sim.scheduler import EngineCore


def with_offload(cfg: EngineConfig, **changes: object) -> EngineConfig:
    assert cfg.offload is not None
    return dataclasses.replace(cfg, offload=dataclasses.replace(cfg.offload, **changes))  # type: ignore[arg-type]


def run_one(core: EngineCore, rid: str, prompt: list[int], now: float, max_tokens: int = 1) -> tuple[SimRequest, float]:
    req = core.new_request(rid, prompt, max_tokens, 0, now)
    core.add(req)
    return req, drive(core, now)


PROMPT = list(range(1000, 1013))  # 13 tokens: 3 full blocks of 4


def test_a_chunk_is_loadable_only_after_its_store_completes() -> None:
    core = EngineCore(make_cfg(64, cpu_chunks=16, enable_prefix_caching=False))
    first = core.new_request("a", PROMPT, 1, 0, 0.0)
    core.add(first)
    plan = core.schedule(0.0)
    assert plan is not None
    core.complete(plan)  # a computed its prompt: its chunks are being copied to the CPU tier
    off = core.offload
    assert off is not None and len(off.cpu) == 3
    stored_at = off.next_event()
    assert stored_at is not None and stored_at > plan.end
    second = core.new_request("b", PROMPT, 1, 0, plan.end)
    core.add(second)
    assert core.schedule(plan.end) is None  # b is deferred (vLLM: HIT_PENDING), not served by recomputing
    assert second.state == ReqState.WAITING and core.next_wakeup() == stored_at
    drive(core, plan.end)
    assert second.cpu_hit_tokens == 12 and second.recomputed_tokens == 1
    assert second.first_scheduled is not None and second.first_scheduled >= stored_at


def test_a_hit_covering_the_whole_prompt_recomputes_only_the_last_token() -> None:
    core = EngineCore(make_cfg(64, cpu_chunks=16, enable_prefix_caching=False))
    prompt = PROMPT[:12]  # exactly 3 chunks
    _a, end = run_one(core, "a", prompt, 0.0)
    b, _end = run_one(core, "b", prompt, end + 1.0)
    assert b.cpu_hit_tokens == 12 and b.recomputed_tokens == 0 and b.state == ReqState.FINISHED


def test_offload_prompt_only_keeps_decode_chunks_out_unless_off() -> None:
    for prompt_only, expected in ((True, 2), (False, 4)):
        cfg = with_offload(make_cfg(64, cpu_chunks=16), offload_prompt_only=prompt_only)
        core = EngineCore(cfg)
        req, _end = run_one(core, "a", list(range(8)), 0.0, max_tokens=9)  # 8 prompt + 8 computed decode tokens
        assert core.offload is not None and len(core.offload.cpu) == expected
        assert all(h in core.offload.cpu for h in req.chain.hashes[:expected])


def test_store_threshold_stores_a_chunk_on_its_second_offer() -> None:
    cfg = with_offload(make_cfg(64, cpu_chunks=16, enable_prefix_caching=False), store_threshold=2)
    core = EngineCore(cfg)
    off = core.offload
    assert off is not None
    a, end = run_one(core, "a", PROMPT, 0.0)
    assert len(off.cpu) == 0 and off.cpu.stores_skipped == 3 and a.recomputed_tokens == 13
    b, end = run_one(core, "b", PROMPT, end + 1.0)
    assert len(off.cpu) == 3 and b.cpu_hit_tokens == 0
    c, _end = run_one(core, "c", PROMPT, end + 1.0)
    assert c.cpu_hit_tokens == 12


def test_store_threshold_is_parsed_as_vllm_does() -> None:
    def parse(extra: dict[str, object]) -> int:
        text = json.dumps({"kv_connector": "OffloadingConnector",
                           "kv_connector_extra_config": {"cpu_bytes_to_use": 2**30, **extra}})
        cfg = parse_kv_transfer_config(text, 16, None)
        assert "store_threshold" not in cfg.ignored_keys
        return cfg.store_threshold

    assert parse({}) == 0 and parse({"store_threshold": 2}) == 2
    for bad in (-1, True, "2"):
        with pytest.raises(ConfigError, match="store_threshold must be a non-negative integer"):
            parse({"store_threshold": bad})
    with pytest.raises(ConfigError, match="store_threshold is not supported for TieringOffloadingSpec"):
        parse({"spec_name": "TieringOffloadingSpec", "store_threshold": 2,
               "secondary_tiers": [{"type": "fs", "root_dir": "/tmp/x"}]})


def test_an_offer_is_stored_whole_or_not_at_all_and_made_again_next_step() -> None:
    core = EngineCore(make_cfg(64, cpu_chunks=3, enable_prefix_caching=False))
    off = core.offload
    assert off is not None
    a = core.new_request("a", PROMPT, 1, 0, 0.0)
    b = core.new_request("b", list(range(13)), 3, 0, 0.0)
    core.add(a)
    core.add(b)
    drive(core)
    # same step: a's 3 chunks are still being written when b offers its 3, so b's offer fails whole; b decodes
    # on and offers them again the next step, when a's copies have ended and can be evicted
    assert off.stats.allocation_failures == 1
    assert all(h in off.cpu for h in b.chain.hashes[:3]) and not any(h in off.cpu for h in a.chain.hashes)


def test_a_prompt_longer_than_the_cpu_tier_is_never_stored() -> None:
    core = EngineCore(make_cfg(64, cpu_chunks=2, enable_prefix_caching=False))
    _a, _end = run_one(core, "a", PROMPT, 0.0, max_tokens=4)
    assert core.offload is not None and len(core.offload.cpu) == 0
    assert core.offload.stats.allocation_failures == 4  # offered in every step of the request


def test_a_hit_shorter_than_a_chunk_beyond_the_gpu_hit_is_no_hit() -> None:
    core = EngineCore(make_cfg(64, cpu_chunks=8, chunk_blocks=2, enable_prefix_caching=False))
    off = core.offload
    assert off is not None
    hashes = [11, 12, 13, 14, 15, 16]  # chunks keyed 12, 14, 16
    assert off.store_chunks("a", [12, 14], 0, 0.0) is not None
    assert off.lookup("b", hashes, 3, 6, 1.0) is None  # GPU hit ends inside chunk 1: 1 block left, < 2
    hit = off.lookup("c", hashes, 1, 6, 1.0)
    assert isinstance(hit, ExternalHit) and hit.keys == [12, 14] and hit.n_blocks == 3


def test_tiered_stores_write_through_to_disk_and_hold_the_cpu_copy(tmp_path: Path) -> None:
    core = EngineCore(make_cfg(64, cpu_chunks=16, fs_root=tmp_path))
    a, _end = run_one(core, "a", PROMPT, 0.0)
    off = core.offload
    assert off is not None and off.fs is not None
    assert all(h in off.fs.index and h in off.cpu for h in a.chain.hashes)  # on disk without any eviction
    assert off.stats.write_bytes[FS] == 3 * off.chunk_bytes
    restarted = EngineCore(make_cfg(64, cpu_chunks=16, fs_root=tmp_path))
    assert restarted.offload is not None and restarted.offload.fs is not None
    assert len(restarted.offload.fs) == 3  # a restart finds every stored chunk, not only evicted ones


def test_disk_hits_are_promoted_into_the_cpu_tier_then_loaded(tmp_path: Path) -> None:
    core = EngineCore(make_cfg(64, cpu_chunks=4, fs_root=tmp_path, enable_prefix_caching=False))
    off = core.offload
    assert off is not None
    _a, end = run_one(core, "a", PROMPT, 0.0)
    _x, end = run_one(core, "x", list(range(13)), end + 1.0)  # evicts a's tail (a's head is more recent)
    hashes = _a.chain.hashes
    assert hashes[0] in off.cpu and not any(h in off.cpu for h in hashes[1:])
    b = core.new_request("b", PROMPT, 1, 0, end + 1.0)
    core.add(b)
    now = end + 1.0
    assert core.schedule(now) is None  # chunk 1 not yet known to be on disk: its probe answers when the step ends
    assert not any(h in off.cpu for h in hashes[1:])
    now = core.next_wakeup() or now
    assert core.schedule(now) is None  # on disk: promotions of chunks 1 and 2 start, b waits for the disk reads
    assert all(off.cpu.lookup(h, now) == "pending" for h in hashes[1:])
    assert hashes[0] not in off.cpu  # promoting chunk 1 evicted chunk 0, which this lookup had just hit (vLLM
    # protects only the chunk it promotes), so the next try promotes chunk 0 too
    drive(core, now)
    assert (b.cpu_hit_tokens, b.disk_hit_tokens, b.recomputed_tokens) == (0, 12, 1)  # promoted for b: disk hits
    assert off.stats.read_bytes[FS] == 3 * off.chunk_bytes and off.stats.chunk_hits[FS] == 3


def test_a_disk_hit_longer_than_the_cpu_tier_never_loads(tmp_path: Path) -> None:
    """vLLM 0.32 does the same (seen with its TieringOffloadingManager): each lookup promotes the chunks it finds on
    disk, evicting the ones promoted for it before, and defers; the request waits until it is aborted."""
    core = EngineCore(make_cfg(64, cpu_chunks=2, fs_root=tmp_path, enable_prefix_caching=False))
    off = core.offload
    assert off is not None and off.fs is not None
    end = 0.0
    for n in (8, 12):  # two offers of at most 2 chunks put the prompt's 3 chunks on disk
        _r, end = run_one(core, f"w{n}", PROMPT[:n], end + 1.0)
    _y, end = run_one(core, "y", list(range(8)), end + 1.0)
    assert all(h in off.fs.index for h in _r.chain.hashes)
    b = core.new_request("b", PROMPT, 1, 0, end + 1.0)
    core.add(b)
    now = end + 1.0
    for _ in range(50):
        assert core.schedule(now) is None
        wake = core.next_wakeup()
        assert wake is not None
        now = wake
    assert b.state == ReqState.WAITING and b.first_scheduled is None
    assert off.stats.promotion_allocation_failures >= 25
    core.abort(b, now)
    assert not core.has_work()
