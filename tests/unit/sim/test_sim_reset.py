"""The simulator's ``POST /reset_prefix_cache``, as vLLM 0.32 serves it: mounted only with VLLM_SERVER_DEV_MODE=1;
forgets the GPU prefix cache (refused while a block is held), with ``reset_external`` empties the CPU tier but keeps
the fs tier's files; never lowers the hit counters."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from sim_unit_helpers import drive, make_cfg

from harness.sim.request import SimRequest
from harness.sim.scheduler import EngineCore
from tests.support.sim import running_sim

PROMPT = list(range(2000, 2017))  # 17 tokens: 4 full blocks of 4


def send(core: EngineCore, rid: str, now: float) -> tuple[SimRequest, float]:
    req = core.new_request(rid, PROMPT, 1, 0, now)
    core.add(req)
    return req, drive(core, now)


def test_the_gpu_prefix_cache_is_forgotten_and_the_counters_stay() -> None:
    core = EngineCore(make_cfg(64))
    _a, now = send(core, "a", 0.0)
    b, now = send(core, "b", now + 1.0)
    assert b.gpu_hit_tokens == 16
    hits = core.stats.prefix_hits
    assert core.reset_prefix_cache(now + 1.0) is True
    assert core.pool.num_cached == 0 and core.stats.prefix_hits == hits  # counters only grow, as vLLM's
    c, _now = send(core, "c", now + 2.0)
    assert c.gpu_hit_tokens == 0 and c.recomputed_tokens == len(PROMPT)


def test_a_held_block_refuses_the_reset_and_changes_nothing() -> None:
    core = EngineCore(make_cfg(64))
    _a, now = send(core, "a", 0.0)
    cached = core.pool.num_cached
    running = core.new_request("r", PROMPT, 50, 0, now)
    core.add(running)
    plan = core.schedule(now)
    assert plan is not None
    core.complete(plan)  # r runs and holds its blocks
    assert core.reset_prefix_cache(plan.end) is False
    assert core.pool.num_cached >= cached


def test_reset_external_empties_the_cpu_tier_and_keeps_the_disk_tier(tmp_path: Path) -> None:
    core = EngineCore(make_cfg(64, cpu_chunks=16, fs_root=tmp_path))
    _a, now = send(core, "a", 0.0)
    off = core.offload
    assert off is not None and off.fs is not None and len(off.cpu) == 4 and len(off.fs) == 4
    assert core.reset_prefix_cache(now + 1.0, reset_external=False) is True
    assert len(off.cpu) == 4  # without reset_external the tiers are not touched
    assert core.reset_prefix_cache(now + 1.0, reset_external=True) is True
    assert len(off.cpu) == 0 and len(off.fs) == 4  # vLLM 0.32 keeps the secondary tiers' data
    b, _now = send(core, "b", now + 2.0)
    assert (b.gpu_hit_tokens, b.cpu_hit_tokens) == (0, 0) and b.disk_hit_tokens == 16


def test_the_route_exists_only_in_dev_mode_and_only_for_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_SERVER_DEV_MODE", raising=False)
    with running_sim(in_process=True) as sim:
        assert httpx.post(sim.base_url + "/reset_prefix_cache", timeout=10.0).status_code == 404
    monkeypatch.setenv("VLLM_SERVER_DEV_MODE", "1")
    with running_sim(in_process=True) as sim:
        reply = httpx.post(sim.base_url + "/reset_prefix_cache?reset_external=true", timeout=10.0)
        assert (reply.status_code, reply.json()) == (200, {"success": True})
        bad = httpx.post(sim.base_url + "/reset_prefix_cache?reset_external=maybe", timeout=10.0)
        assert bad.status_code == 400  # vLLM 0.32 answers a bad boolean with 400
    with running_sim(in_process=True, flavor="trtllm") as sim:
        assert httpx.post(sim.base_url + "/reset_prefix_cache", timeout=10.0).status_code == 404
