"""Predicted tier hit shares per step: the one-pass LRU split against a brute-force LRU, tier nesting, and the plan's
block hashes re-derived at another block size."""

from __future__ import annotations

import itertools
import random
from collections import OrderedDict

import pytest

from harness.config.steps import StepLevel
from harness.config.workload import WorkloadSpec
from harness.workload.hit_prediction import (
    PlannedAccess,
    TierCapacity,
    block_hashes,
    predict_step_shares,
    prompt_units,
    sent_requests,
)
from harness.workload.plan import build_request_plan
from harness.workload.tokens import EXACT_WORDS, TokenCalibration


def brute_hits(requests: list[PlannedAccess], block_tokens: int, capacity: int) -> dict[int, int]:
    """Hit tokens per step of a plain LRU of ``capacity`` blocks: leading run of cached blocks, then touch all."""
    cache: OrderedDict[int, None] = OrderedDict()
    out: dict[int, int] = {}
    for r in requests:
        run = True
        for i, b in enumerate(r.block_ids):
            tokens = max(0, min(block_tokens, r.prompt_tokens - i * block_tokens))
            if run and b in cache:
                out[r.step] = out.get(r.step, 0) + tokens
            else:
                run = False
        for b in r.block_ids:
            cache[b] = None
            cache.move_to_end(b)
            while len(cache) > capacity:
                cache.popitem(last=False)
        out.setdefault(r.step, 0)
    return out


def random_requests(seed: int, n: int = 120) -> list[PlannedAccess]:
    rng = random.Random(seed)
    prefixes = [[rng.getrandbits(40) for _ in range(rng.randint(1, 6))] for _ in range(5)]
    out = []
    for i in range(n):
        own = [rng.getrandbits(40) for _ in range(rng.randint(0, 4))]
        blocks = prefixes[rng.randrange(5)] + own if rng.random() < 0.8 else own
        out.append(PlannedAccess(step=-1 if i < 10 else i // 40, block_ids=blocks,
                                 prompt_tokens=max(0, len(blocks) * 16 - rng.randint(0, 15))))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(("gpu", "cpu", "disk", "mode"), [
    (4, 0, 0, "inclusive"), (3, 12, 0, "inclusive"), (3, 8, 30, "inclusive"), (12, 4, 0, "inclusive"),
    (3, 5, 9, "exclusive"), (1, 0, 0, "exclusive"),
])
def test_shares_match_a_brute_force_lru_per_step(seed: int, gpu: int, cpu: int, disk: int, mode: str) -> None:
    reqs = random_requests(seed)
    cap = TierCapacity(gpu_tokens=gpu * 16, cpu_tokens=cpu * 16, disk_tokens=disk * 16, mode=mode)  # type: ignore[arg-type]
    shares = predict_step_shares(reqs, 16, cap)
    r_gpu, r_cpu, r_disk = cap.reaches(16)
    want = {r: brute_hits(reqs, 16, r) for r in (r_gpu, r_cpu, r_disk)}
    assert list(shares) == sorted({r.step for r in reqs})
    for step, got in shares.items():
        total = sum(r.prompt_tokens for r in reqs if r.step == step)
        assert got.prompt_tokens == total
        assert got.gpu == pytest.approx(want[r_gpu][step] / total)
        assert got.cpu == pytest.approx((want[r_cpu][step] - want[r_gpu][step]) / total)
        assert got.disk == pytest.approx((want[r_disk][step] - want[r_cpu][step]) / total)
        assert got.miss == pytest.approx(1 - want[r_disk][step] / total)


def test_a_first_touch_is_never_a_hit_even_in_a_huge_cache() -> None:
    reqs = [PlannedAccess(step=0, block_ids=[1, 2, 3], prompt_tokens=48),
            PlannedAccess(step=1, block_ids=[1, 2, 4], prompt_tokens=48)]
    shares = predict_step_shares(reqs, 16, TierCapacity(gpu_tokens=10**9))
    assert shares[0].gpu == 0.0 and shares[0].miss == 1.0
    assert shares[1].gpu == pytest.approx(32 / 48)


def test_inclusive_cpu_tier_no_larger_than_gpu_adds_nothing_exclusive_adds() -> None:
    reqs = random_requests(7)
    inclusive = predict_step_shares(reqs, 16, TierCapacity(gpu_tokens=64, cpu_tokens=64, mode="inclusive"))
    exclusive = predict_step_shares(reqs, 16, TierCapacity(gpu_tokens=64, cpu_tokens=64, mode="exclusive"))
    assert all(s.cpu == 0.0 for s in inclusive.values())
    assert sum(s.cpu for s in exclusive.values()) > 0


def workload(api: str) -> WorkloadSpec:
    return WorkloadSpec.model_validate({
        "seed": 5, "api": api,
        "classes": [{"name": "c", "weight": 1, "prompt_tokens": {"min": 300, "max": 900},
                     "output_tokens": {"min": 4, "max": 8}}],
        "reuse": {"system_prompts": {"families": 3, "tokens": 400, "zipf_s": 0.5}, "unique_fraction": 0.2},
    })


@pytest.mark.parametrize("api", ["chat", "completions"])
@pytest.mark.parametrize("calib", [EXACT_WORDS, TokenCalibration(method="tokenize", tokens_per_word=1.3)])
def test_plan_hashes_rederived_at_the_plans_own_block_equal_the_planned_ones(api: str,
                                                                             calib: TokenCalibration) -> None:
    wl = workload(api)
    plan = build_request_plan(wl, StepLevel(concurrency=3, duration_s=5), step_index=0, calibration=calib)
    reqs = list(itertools.islice(plan.user_stream(1), 12))
    for req in reqs:
        assert prompt_units(req)
        assert block_hashes(req, wl.hash_block_tokens, calib) == list(req.hash_ids)
    fine = block_hashes(reqs[0], 16, calib)
    assert len(fine) > len(reqs[0].hash_ids)  # a finer grain: more blocks


def test_sent_requests_finds_each_users_first_requests_by_key() -> None:
    plan = build_request_plan(workload("chat"), StepLevel(concurrency=2, duration_s=5), step_index=1,
                              calibration=EXACT_WORDS)
    found = sent_requests(plan, {0: 3, 1: 1}, 4, slack=0)
    assert sorted(found) == sorted([r.key for r in itertools.islice(plan.user_stream(0), 3)]
                                   + [next(iter(plan.user_stream(1))).key])
