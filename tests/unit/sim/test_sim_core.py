"""The engine model with a fake clock: prefix caching, offload tiers, preemption, accounting."""

from __future__ import annotations

import random
from pathlib import Path

from sim_unit_helpers import BLOCK, COMPUTE, drive, make_cfg

from harness.sim.request import SimRequest
from harness.sim.scheduler import EngineCore


def _prompt(family: int, length: int, suffix: int | None = None) -> list[int]:
    ids = [family * 1_000_000 + i for i in range(length)]
    if suffix is not None:
        ids += [999_000_000 + suffix * 100 + j for j in range(3)]
    return ids


def _run_one(core: EngineCore, ids: list[int], now: float, max_tokens: int = 2, rid: str = "r") -> SimRequest:
    req = core.new_request(rid, ids, max_tokens, 7, now)
    core.add(req)
    drive(core, now)
    return req


def _check_accounting(core: EngineCore, reqs: list[SimRequest]) -> None:
    for r in reqs:
        assert r.gpu_hit_tokens + r.cpu_hit_tokens + r.disk_hit_tokens + r.recomputed_tokens == r.prompt_len
        assert min(r.gpu_hit_tokens, r.cpu_hit_tokens, r.disk_hit_tokens, r.recomputed_tokens) >= 0
    st = core.stats
    assert st.prompt_tokens == sum(r.prompt_len for r in reqs)
    assert st.prompt_tokens == st.src_local_compute + st.src_local_cache_hit + st.src_external
    assert st.cached_device + st.cached_host + st.cached_disk == st.prefix_hits + st.external_hits
    assert st.src_local_cache_hit == st.cached_device == sum(r.gpu_hit_tokens for r in reqs)
    assert st.cached_host == sum(r.cpu_hit_tokens for r in reqs)
    assert st.cached_disk == sum(r.disk_hit_tokens for r in reqs)
    assert st.src_local_compute == sum(r.recomputed_tokens for r in reqs)
    assert st.prefix_queries == sum(r.prompt_len for r in reqs)


def test_same_prompt_twice_hits_gpu_and_is_faster() -> None:
    core = EngineCore(make_cfg(64))
    ids = _prompt(1, 101)
    a = _run_one(core, ids, 0.0, rid="a")
    hits_before = core.stats.prefix_hits
    b = _run_one(core, ids, 10.0, rid="b")
    assert a.gpu_hit_tokens == 0
    assert b.gpu_hit_tokens == 100  # capped at (101 - 1) // 4 blocks: the last token is always computed
    assert core.stats.prefix_hits - hits_before == b.gpu_hit_tokens
    assert a.first_token_at is not None and b.first_token_at is not None
    assert (b.first_token_at - b.arrival) < (a.first_token_at - a.arrival)
    _check_accounting(core, [a, b])


def test_block_aligned_prompt_recomputes_last_block() -> None:
    core = EngineCore(make_cfg(64))
    ids = _prompt(1, 40)
    _run_one(core, ids, 0.0)
    b = _run_one(core, ids, 5.0, rid="b")
    assert b.gpu_hit_tokens == 36 and b.recomputed_tokens == 4


def test_step_time_equation() -> None:
    core = EngineCore(make_cfg(64))
    req = core.new_request("r", _prompt(1, 50), 3, 1, 0.0)
    core.add(req)
    plan = core.schedule(0.0)
    assert plan is not None
    n = 50
    expected = COMPUTE.step_overhead_s + n * COMPUTE.prefill_s_per_token + COMPUTE.prefill_s_per_token_ctx * (
        n * (n - 1) / 2)
    assert abs(plan.duration - expected) < 1e-12
    core.complete(plan)
    plan2 = core.schedule(plan.end)
    assert plan2 is not None
    expected2 = COMPUTE.step_overhead_s + COMPUTE.decode_s_per_seq + COMPUTE.decode_s_per_ctx_token * 50
    assert abs(plan2.duration - expected2) < 1e-12


def test_chunked_prefill_splits_long_prompts() -> None:
    core = EngineCore(make_cfg(128, max_num_batched_tokens=64, max_model_len=512))
    req = core.new_request("r", _prompt(1, 200), 1, 1, 0.0)
    core.add(req)
    steps = 0
    now = 0.0
    while core.has_work():
        plan = core.schedule(now)
        assert plan is not None
        assert plan.num_tokens <= 64
        core.complete(plan)
        now = plan.end
        steps += 1
    assert steps == 4  # 64 + 64 + 64 + 8
    assert req.num_output == 1


def test_cpu_tier_serves_working_set_larger_than_gpu() -> None:
    # 10 families x 40 tokens = 100 blocks; GPU 40 blocks; CPU 200 chunks.
    def workload(core: EngineCore) -> list[SimRequest]:
        reqs: list[SimRequest] = []
        now = 0.0
        for rnd in range(3):
            for fam in range(10):
                req = core.new_request(f"{rnd}-{fam}", _prompt(fam, 40, suffix=rnd), 2, 1, now)
                core.add(req)
                now = drive(core, now) + 0.001
                reqs.append(req)
        return reqs

    with_tier = EngineCore(make_cfg(40, cpu_chunks=200))
    reqs = workload(with_tier)
    _check_accounting(with_tier, reqs)
    st = with_tier.stats
    assert st.cached_host > 0
    assert with_tier.offload is not None
    assert with_tier.offload.stats.store_bytes > 0
    assert with_tier.offload.stats.load_bytes == st.cached_host * 1000
    assert st.external_queries == st.prompt_tokens

    without = EngineCore(make_cfg(40))
    reqs2 = workload(without)
    _check_accounting(without, reqs2)
    assert without.stats.cached_host == 0
    assert without.stats.external_queries == 0
    assert without.stats.src_local_compute > st.src_local_compute


def test_promotions_contend_on_the_link() -> None:
    core = EngineCore(make_cfg(40, cpu_chunks=200))
    # fill the CPU tier with two families, then evict them from the GPU
    for fam in (1, 2):
        _run_one(core, _prompt(fam, 60), 0.0, rid=f"w{fam}")
    for fam in range(3, 8):
        _run_one(core, _prompt(fam, 60), 1.0, rid=f"f{fam}")
    now = 10.0
    a = core.new_request("a", _prompt(1, 60), 2, 1, now)
    b = core.new_request("b", _prompt(2, 60), 2, 1, now)
    core.add(a)
    core.add(b)
    core.schedule(now)
    assert a.load is not None and b.load is not None
    single = 1e-5 + a.load.n_blocks * BLOCK * 1000 / 1e9
    assert abs((a.load.ready_at - now) - single) < 1e-9
    assert b.load.ready_at > a.load.ready_at + 0.9 * single  # queued behind a's promotion
    drive(core, now)
    assert a.cpu_hit_tokens > 0 and b.cpu_hit_tokens > 0


def test_tiered_disk_hits_cache_loss_and_restart(tmp_path: Path) -> None:
    root = tmp_path / "kv"

    def cfg() -> object:
        return make_cfg(20, cpu_chunks=20, fs_root=root)

    core = EngineCore(cfg())  # type: ignore[arg-type]
    reqs = [_run_one(core, _prompt(f, 40), float(f), rid=f"a{f}") for f in range(8)]
    # families 0.. were pushed out of GPU (20 blocks) and CPU (20 chunks), cascading to disk
    assert core.offload is not None and core.offload.fs is not None
    assert len(core.offload.fs) > 0
    again = _run_one(core, _prompt(0, 40), 100.0, rid="again")
    assert again.disk_hit_tokens > 0
    assert core.stats.cached_disk == again.disk_hit_tokens
    _check_accounting(core, [*reqs, again])

    # cache loss: delete the files; the same prompt now misses without error
    core2 = EngineCore(cfg())  # type: ignore[arg-type]
    _run_one(core2, _prompt(1, 40), 0.0, rid="warm")  # restart with the same root: disk hit
    assert core2.stats.cached_disk > 0
    assert core2.offload is not None
    deleted = core2.offload.cache_loss()
    assert deleted > 0
    lost = _run_one(core2, _prompt(2, 40), 10.0, rid="lost")
    assert lost.disk_hit_tokens == 0 and lost.cpu_hit_tokens == 0


def test_foreign_files_are_never_deleted(tmp_path: Path) -> None:
    root = tmp_path / "kv"
    root.mkdir()
    keep = root / "mine.txt"
    keep.write_text("user data")
    core = EngineCore(make_cfg(20, cpu_chunks=5, fs_root=root))
    assert core.offload is not None and core.offload.fs is not None
    fake = core.offload.fs.dir / ("0" * 16 + ".kvsim")
    fake.write_bytes(b"not ours")
    for f in range(6):
        _run_one(core, _prompt(f, 40), float(f))
    core.offload.cache_loss()
    assert keep.read_text() == "user data"
    assert fake.exists()


def test_preemption_under_block_pressure() -> None:
    core = EngineCore(make_cfg(24, max_num_seqs=8, max_model_len=96))
    reqs = []
    for i in range(6):
        req = core.new_request(f"r{i}", _prompt(10 + i, 30), 40, i, 0.0)
        core.add(req)
        reqs.append(req)
    drive(core)
    assert core.stats.preemptions > 0
    assert all(r.num_output == 40 for r in reqs)
    assert sum(r.preemptions for r in reqs) == core.stats.preemptions
    assert core.pool.num_free == core.pool.num_blocks
    _check_accounting(core, reqs)


def test_random_workload_accounting_and_no_leaks(tmp_path: Path) -> None:
    rng = random.Random(3)
    for policy in ("lru", "arc"):
        core = EngineCore(make_cfg(48, cpu_chunks=40, fs_root=tmp_path / policy, fs_max_chunks=60,
                                   policy=policy, max_num_seqs=6, max_model_len=128, chunk_blocks=2))
        reqs = []
        now = 0.0
        for i in range(150):
            fam = rng.randrange(12)
            req = core.new_request(f"{i}", _prompt(fam, rng.randrange(8, 90), suffix=rng.randrange(3)),
                                   rng.randrange(1, 20), i, now)
            core.add(req)
            reqs.append(req)
            if rng.random() < 0.3:
                now = drive(core, now)
            else:
                for _ in range(rng.randrange(1, 5)):
                    plan = core.schedule(now)
                    if plan is None:
                        break
                    core.complete(plan)
                    now = plan.end
        drive(core, now)
        _check_accounting(core, reqs)
        st = core.stats
        assert st.cached_host > 0 and st.cached_disk > 0
        assert core.pool.num_free == core.pool.num_blocks
        assert core.offload is not None
        assert not core.offload._loading
        assert len(core.offload.cpu) <= core.offload.cpu.capacity


def test_abort_frees_blocks() -> None:
    core = EngineCore(make_cfg(32))
    req = core.new_request("r", _prompt(1, 40), 50, 1, 0.0)
    core.add(req)
    plan = core.schedule(0.0)
    assert plan is not None
    core.complete(plan)
    core.abort(req, plan.end)
    assert core.pool.num_free == core.pool.num_blocks
    assert not core.has_work()
    assert core.stats.finished["abort"] == 1


def test_offload_on_evict_mode_stores_only_evicted_blocks() -> None:
    core = EngineCore(make_cfg(20, cpu_chunks=100, store_mode="on_evict"))
    a = _run_one(core, _prompt(1, 40), 0.0)
    assert core.offload is not None
    assert core.offload.stats.store_bytes == 0  # nothing evicted yet
    mid = _run_one(core, _prompt(2, 60), 1.0)
    assert core.offload.stats.store_bytes > 0
    b = _run_one(core, _prompt(1, 40), 2.0)
    assert b.cpu_hit_tokens > 0
    _check_accounting(core, [a, mid, b])


def test_prefix_caching_disabled_never_hits() -> None:
    core = EngineCore(make_cfg(64, enable_prefix_caching=False))
    _run_one(core, _prompt(1, 50), 0.0)
    b = _run_one(core, _prompt(1, 50), 1.0)
    assert b.gpu_hit_tokens == 0 and core.stats.prefix_hits == 0


def test_outputs_are_deterministic() -> None:
    c1, c2 = EngineCore(make_cfg(64)), EngineCore(make_cfg(64))
    r1 = _run_one(c1, _prompt(1, 20), 0.0, max_tokens=10)
    r2 = _run_one(c2, _prompt(1, 20), 0.0, max_tokens=10)
    assert r1.output_idx == r2.output_idx and len(r1.output_idx) == 10
