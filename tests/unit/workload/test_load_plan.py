"""Request plans: determinism (byte for byte), class mix, Zipf families, sessions, RAG, lengths, bad input."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from harness.config.steps import StepLevel
from harness.config.workload import WorkloadSpec
from harness.workload.plan import LoadConfigError, build_request_plan, plan_bytes, plan_fingerprint
from harness.workload.requests import PlannedRequest
from harness.workload.synthesis import zipf_cdf
from harness.workload.tokens import EXACT_WORDS, TokenCalibration


def workload(**over: object) -> WorkloadSpec:
    data: dict[str, object] = {
        "seed": 11,
        "classes": [
            {"name": "short", "weight": 3, "prompt_tokens": {"min": 200, "max": 800},
             "output_tokens": {"min": 32, "max": 128}},
            {"name": "long", "weight": 1, "prompt_tokens": {"min": 8000, "max": 32000},
             "output_tokens": {"min": 64, "max": 256}},
        ],
    }
    data.update(over)
    return WorkloadSpec.model_validate(data)


def sim_tokens(req: PlannedRequest) -> int:
    """Tokens as the simulator counts them: words, plus role markers and the generation marker for chat."""
    words = sum(len(content.split()) for _, content in req.messages)
    return words if req.api == "completions" else words + len(req.messages) + 1


LEVEL = StepLevel(concurrency=4, duration_s=10)


def test_same_seed_same_plan_byte_for_byte() -> None:
    first = plan_bytes(build_request_plan(workload(), LEVEL, step_index=0), per_stream=12)
    second = plan_bytes(build_request_plan(workload(), LEVEL, step_index=0), per_stream=12)
    assert first == second
    assert len(first) > 100_000  # prompts included, not just metadata
    assert plan_fingerprint(build_request_plan(workload(), LEVEL, step_index=0), 12) == \
        plan_fingerprint(build_request_plan(workload(), LEVEL, step_index=0), 12)


def test_seed_and_step_change_the_plan() -> None:
    base = plan_bytes(build_request_plan(workload(), LEVEL, step_index=0), per_stream=4)
    assert plan_bytes(build_request_plan(workload(seed=12), LEVEL, step_index=0), per_stream=4) != base
    assert plan_bytes(build_request_plan(workload(), LEVEL, step_index=1), per_stream=4) != base


def test_user_streams_do_not_depend_on_concurrency() -> None:
    """User u sends the same requests whether the step has 4 or 16 users (rising steps stay comparable)."""
    small = build_request_plan(workload(), StepLevel(concurrency=4, duration_s=5), step_index=2)
    large = build_request_plan(workload(), StepLevel(concurrency=16, duration_s=5), step_index=2)
    for user in range(4):
        a = [r.to_line() for r in itertools.islice(small.user_stream(user), 5)]
        b = [r.to_line() for r in itertools.islice(large.user_stream(user), 5)]
        assert a == b


def test_class_mix_follows_weights_and_lengths_stay_in_range() -> None:
    plan = build_request_plan(workload(), LEVEL, step_index=0)
    reqs = list(itertools.islice(plan.user_stream(0), 800))
    mix = Counter(r.request_class for r in reqs)
    assert 0.70 < mix["short"] / len(reqs) < 0.80
    for r in reqs:
        lo, hi = (200, 800) if r.request_class == "short" else (8000, 32000)
        assert lo <= r.prompt_tokens_target <= hi
        assert sim_tokens(r) == r.prompt_tokens_target  # exact for the one-token-per-word tokenizer
        assert (32 if r.request_class == "short" else 64) <= r.output_tokens_target


def test_system_prompt_families_are_zipf_popular() -> None:
    wl = workload(classes=[{"name": "c", "weight": 1, "prompt_tokens": {"min": 300, "max": 400},
                            "output_tokens": {"min": 1, "max": 2}, "reuse": "system_prompt"}],
                  reuse={"system_prompts": {"families": 5, "tokens": 128, "zipf_s": 1.2}})
    plan = build_request_plan(wl, LEVEL, step_index=0)
    reqs = list(itertools.islice(plan.user_stream(0), 3000))
    counts = Counter(r.prefix_family for r in reqs)
    cdf = zipf_cdf(5, 1.2)
    probs = [cdf[0], *(cdf[i] - cdf[i - 1] for i in range(1, 5))]
    for i, p in enumerate(probs):
        assert abs(counts[f"sys:{i}"] / len(reqs) - p) < 0.03
    # the same family means the same system prompt text; a different family differs from its first token
    by_family = {r.prefix_family: r.messages[0] for r in reqs}
    assert all(m[0] == "system" and len(m[1].split()) == 128 for m in by_family.values())
    texts = {m[1].split()[0:6].__repr__() for m in by_family.values()}
    assert len(texts) == 5
    same = [r for r in reqs if r.prefix_family == "sys:0"][:2]
    assert same[0].messages[0] == same[1].messages[0] and same[0].messages[1] != same[1].messages[1]
    assert same[0].hash_ids != same[1].hash_ids


def test_sessions_grow_turn_by_turn() -> None:
    wl = workload(classes=[{"name": "chat", "weight": 1, "prompt_tokens": {"min": 50, "max": 60},
                            "output_tokens": {"min": 10, "max": 20}, "reuse": "session"}],
                  reuse={"sessions": {"turns": 3, "think_time_s": 2.5},
                         "system_prompts": {"families": 2, "tokens": 64}})
    plan = build_request_plan(wl, StepLevel(concurrency=2, duration_s=5, think_time_s=0.5), step_index=0)
    reqs = list(itertools.islice(plan.user_stream(1), 6))
    assert [r.turn for r in reqs] == [0, 1, 2, 0, 1, 2]
    assert len({r.session_id for r in reqs}) == 2
    for prev, cur in itertools.pairwise(reqs[:3]):
        assert cur.messages[:len(prev.messages)] == prev.messages  # history resent as it was
        assert cur.messages[len(prev.messages)][0] == "assistant"
        assert len(cur.messages[len(prev.messages)][1].split()) == prev.output_tokens_target
        assert cur.think_s == 2.5
    assert reqs[0].think_s == 0.5 and reqs[3].think_s == 0.5
    assert all(sim_tokens(r) == r.prompt_tokens_target for r in reqs)


def test_rag_takes_k_distinct_documents_in_order() -> None:
    wl = workload(classes=[{"name": "rag", "weight": 1, "prompt_tokens": {"min": 2000, "max": 2500},
                            "output_tokens": {"min": 5, "max": 6}, "reuse": "rag"}],
                  reuse={"rag": {"template_tokens": 50, "documents": 10, "docs_per_request": 3, "doc_tokens": 200}})
    reqs = list(itertools.islice(build_request_plan(wl, LEVEL, step_index=0).user_stream(0), 200))
    for r in reqs:
        assert r.prefix_family is not None and r.prefix_family.startswith("rag:")
        docs = [int(x) for x in r.prefix_family[4:].split(",")]
        assert len(set(docs)) == 3 and docs == sorted(docs)
    assert len({r.messages[0][1].split()[0:50].__repr__() for r in reqs}) == 1  # one template
    popular = Counter(d for r in reqs for d in r.prefix_family[4:].split(","))  # type: ignore[index]
    assert popular["0"] > popular["9"]


def test_unique_fraction_and_documents() -> None:
    wl = workload(classes=[{"name": "c", "weight": 1, "prompt_tokens": {"min": 1000, "max": 1200},
                            "output_tokens": {"min": 5, "max": 6}, "reuse": "document"}],
                  reuse={"documents": {"count": 4, "tokens": 600}, "unique_fraction": 0.25})
    reqs = list(itertools.islice(build_request_plan(wl, LEVEL, step_index=0).user_stream(0), 2000))
    unique = sum(r.prefix_family is None for r in reqs) / len(reqs)
    assert 0.21 < unique < 0.29
    assert {r.prefix_family for r in reqs} - {None} <= {f"doc:{i}" for i in range(4)}


def test_prefix_longer_than_the_prompt_is_cut_but_still_shared() -> None:
    wl = workload(classes=[{"name": "c", "weight": 1, "prompt_tokens": {"min": 100, "max": 120},
                            "output_tokens": {"min": 1, "max": 2}, "reuse": "system_prompt"}],
                  reuse={"system_prompts": {"families": 1, "tokens": 1000}})
    reqs = list(itertools.islice(build_request_plan(wl, LEVEL, step_index=0).user_stream(0), 20))
    assert all(100 <= sim_tokens(r) <= 120 for r in reqs)
    shortest = min(len(r.messages[0][1].split()) for r in reqs)
    heads = {tuple(r.messages[0][1].split()[:shortest]) for r in reqs}
    assert len(heads) == 1


def test_open_loop_arrivals_are_poisson_at_the_rate() -> None:
    plan = build_request_plan(workload(), StepLevel(rate_rps=20, duration_s=10), step_index=0, classes=["short"])
    assert plan.mode == "open"
    arrivals = list(itertools.islice(plan.arrivals(), 1500))
    offsets = [a.offset_s or 0.0 for a in arrivals]
    assert offsets == sorted(offsets)
    assert 18 < len(arrivals) / offsets[-1] < 22


def test_request_quota_splits_exactly() -> None:
    plan = build_request_plan(workload(), StepLevel(concurrency=3, requests=10), step_index=0)
    assert [plan.user_quota(u) for u in range(3)] == [4, 3, 3]
    assert plan.duration_s is None


def test_completions_api_and_calibrated_tokenizer() -> None:
    calib = TokenCalibration(method="tokenize", tokens_per_word=2.0, completion_overhead=1)
    wl = workload(api="completions")
    reqs = list(itertools.islice(build_request_plan(wl, LEVEL, step_index=0, calibration=calib).user_stream(0), 50))
    for r in reqs:
        assert len(r.messages) == 1 and r.messages[0][0] == "prompt"
        words = len(r.messages[0][1].split())
        assert abs(words * 2 + 1 - r.prompt_tokens_target) <= 2
        assert "prompt" in r.body("m", ignore_eos=True, temperature=0.0)


def test_lengths_beyond_max_model_len_are_refused() -> None:
    with pytest.raises(LoadConfigError, match=r"'long'.*max_model_len 8192"):
        build_request_plan(workload(), LEVEL, step_index=0, max_model_len=8192)
    wl = workload(classes=[{"name": "chat", "weight": 1, "prompt_tokens": {"min": 500, "max": 1000},
                            "output_tokens": {"min": 10, "max": 100}, "reuse": "session"}],
                  reuse={"sessions": {"turns": 10}, "system_prompts": None})
    with pytest.raises(LoadConfigError, match="10-turn session"):
        build_request_plan(wl, LEVEL, step_index=0, max_model_len=8192)


def test_unknown_request_class_is_named() -> None:
    with pytest.raises(LoadConfigError, match=r"unknown request class\(es\) 'medium'.*short, long"):
        build_request_plan(workload(), LEVEL, step_index=0, classes=["medium"])
    only_short = build_request_plan(workload(), LEVEL, step_index=0, classes=["short"])
    assert {r.request_class for r in itertools.islice(only_short.user_stream(0), 50)} == {"short"}


def test_records_hash_ids_follow_prefix_sharing() -> None:
    wl = workload(classes=[{"name": "c", "weight": 1, "prompt_tokens": {"min": 2000, "max": 2000},
                            "output_tokens": {"min": 1, "max": 2}, "reuse": "system_prompt"}],
                  reuse={"system_prompts": {"families": 1, "tokens": 1100}}, hash_block_tokens=512)
    a, b = itertools.islice(build_request_plan(wl, LEVEL, step_index=0).user_stream(0), 2)
    assert len(a.hash_ids) == 4  # ceil(2000 / 512)
    # 1 + 1100 tokens shared (the role marker and the system prompt): two full 512-token blocks
    assert a.hash_ids[:2] == b.hash_ids[:2] and a.hash_ids[2] != b.hash_ids[2]
    assert all(0 <= h < 2**63 for h in a.hash_ids)
    assert EXACT_WORDS.overhead("chat", 2) == 3


def test_plans_match_across_processes_and_hash_seeds() -> None:
    import os
    import subprocess
    import sys

    code = ("from harness.config.steps import StepLevel\n"
            "from harness.config.workload import WorkloadSpec\n"
            "from harness.workload.plan import build_request_plan, plan_fingerprint\n"
            "wl = WorkloadSpec.model_validate({'seed': 9, 'classes': [{'name': 'a', 'weight': 1, "
            "'prompt_tokens': {'min': 100, 'max': 900}, 'output_tokens': {'min': 1, 'max': 9}, 'reuse': 'rag'}], "
            "'reuse': {'rag': {'documents': 12, 'doc_tokens': 64}, 'unique_fraction': 0.2}})\n"
            "level = StepLevel(concurrency=3, duration_s=1)\n"
            "print(plan_fingerprint(build_request_plan(wl, level, step_index=4), 8))\n")
    prints = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                             env={**os.environ, "PYTHONHASHSEED": seed}).stdout.strip() for seed in ("1", "2")}
    assert len(prints) == 1 and len(prints.pop()) == 64
