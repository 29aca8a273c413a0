"""Drive the simulated engine on a fake clock to compare its physics with published measurements.

The engine configuration is built by :func:`harness.sim.cli.resolve_serve` from ``serve`` flags (the path
``python -m harness.sim serve`` takes), so what is measured here is what a served simulator would model; the
engine core then runs on modelled time (no sleeping, no wall clock), which makes every figure exact and
reproducible. Three experiments, each the shape of a published benchmark:

- :func:`single_request_ttft`: one prompt recomputed on a cold engine vs the same prompt promoted from the CPU tier
  (vLLM blog 2026-01-08, Figure 1).
- :func:`batch_throughput`: ``n`` prompts of one length submitted at once, a share of them warmed into the CPU
  tier first; prompt tokens per modelled second (the blog's Figure 2).
- :func:`shared_prefix_run`: a closed loop of requests on ``families`` shared prefixes; shares of prompt tokens
  served by each tier and mean TTFT (the CPU-tier sizing rule of vLLM's KV offloading usage guide).

:data:`VLLM_BLOG_FIG1` and :data:`VLLM_BLOG_FIG2` hold the published points (read off the figures; sources in
their docstrings). ``python -m harness.sim.calibration`` prints the simulator next to them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from harness.sim.cli import resolve_serve
from harness.sim.request import SimRequest
from harness.sim.scheduler import EngineCore

VLLM_BLOG_URL = "https://blog.vllm.ai/2026/01/08/kv-offloading-connector.html"

VLLM_BLOG_FIG1: tuple[tuple[int, float, float], ...] = (
    (10_000, 263.0, 42.0), (20_000, 634.0, 70.0), (30_000, 1099.0, 94.0), (40_000, 1653.0, 122.0),
    (50_000, 2291.0, 150.0), (60_000, 3009.0, 188.0), (70_000, 3845.0, 216.0), (80_000, 4789.0, 244.0),
    (90_000, 5742.0, 272.0), (100_000, 6850.0, 310.0),
)
"""(prompt tokens, TTFT recomputed ms, TTFT loaded from CPU ms): Figure 1 ("Single request TTFT
(Llama-3.1-8B-Instruct, NVIDIA H100)") of the vLLM blog post of 2026-01-08, read from the figure's pixels
(reading error about +-10 ms). The text: "loading KV values from the CPU reduces TTFT by X2-X22, depending on the
prompt size"; the 1k-token point (about 30 ms vs 14 ms) sits on the axis and is too coarse to read."""

VLLM_BLOG_FIG1_RANGE = (2.0, 22.0)
"""The published TTFT reduction range, recompute / CPU hit, over prompts of 1k-100k tokens."""

VLLM_BLOG_FIG2: dict[str, float] = {
    "no_offload": 43_773.0, "hit_0": 42_322.0, "hit_50": 73_761.0, "hit_90": 220_073.0, "hit_100": 386_941.0,
}
"""Prompt tokens/s of 10,000 prefill requests of 512 tokens (Figure 2 of the same post, "Concurrent requests
throughput", GPU prefix cache off), read from the figure's pixels: without CPU offloading (dashed line) and with
it at 0/50/90/100% CPU hit rate. The text: "throughput increases by up to X9"."""


@dataclass(frozen=True)
class TtftPoint:
    """One prompt length: modelled TTFT (seconds) recomputed without a CPU tier, recomputed with one (a miss: the
    0%-hit cost of the tier) and promoted from it."""

    prompt_tokens: int
    recompute_s: float
    miss_with_tier_s: float
    cpu_hit_s: float
    cpu_hit_tokens: int

    @property
    def ratio(self) -> float:
        return self.recompute_s / self.cpu_hit_s


@dataclass(frozen=True)
class PrefixRun:
    """Outcome of :func:`shared_prefix_run`: shares of prompt tokens by source and the mean TTFT (seconds)."""

    gpu_share: float
    cpu_share: float
    mean_ttft_s: float
    requests: int


def engine(**flags: Any) -> EngineCore:
    """A fresh engine core configured exactly as ``serve`` with these keyword flags would configure it."""
    _opts, cfg, _banner = resolve_serve(flags)
    return EngineCore(cfg)


def advance(core: EngineCore, now: float) -> float:
    """One scheduler step on the fake clock (or a wait for the next wake-up); the modelled time after it."""
    plan = core.schedule(now)
    if plan is None:
        wake = core.next_wakeup()
        if wake is None:
            raise RuntimeError("simulated engine stuck: work queued but nothing can run or finish")
        return max(now, wake)
    core.complete(plan)
    return plan.end


def drive(core: EngineCore, now: float) -> float:
    """Run the core on the fake clock until it is idle; returns the modelled time it ends."""
    while core.has_work():
        now = advance(core, now)
    return now


def _prompt(family: int, length: int) -> list[int]:
    return [family * 10_000_000 + i for i in range(length)]


def _ttft(req: SimRequest) -> float:
    if req.first_token_at is None:
        raise RuntimeError(f"request {req.request_id} produced no token")
    return req.first_token_at - req.arrival


def single_request_ttft(prompt_tokens: int, cpu_gib: float, **flags: Any) -> TtftPoint:
    """TTFT of one prompt recomputed vs promoted from a CPU tier of ``cpu_gib`` (GPU prefix caching off, as the
    blog's setup, so the second request can only hit in the CPU tier). The first request on the engine with the
    tier is the miss (it fills the tier); the hit follows a modelled second later, when its stores have ended."""
    cold = engine(enable_prefix_caching=False, **flags)
    ids = _prompt(1, prompt_tokens)
    miss = cold.new_request("miss", ids, 1, 1, 0.0)
    cold.add(miss)
    drive(cold, 0.0)
    warm = engine(enable_prefix_caching=False, kv_offloading_size=cpu_gib, **flags)
    first = warm.new_request("warm", ids, 1, 1, 0.0)
    warm.add(first)
    start = drive(warm, 0.0) + 1.0
    hit = warm.new_request("hit", ids, 1, 1, start)
    warm.add(hit)
    drive(warm, start)
    return TtftPoint(prompt_tokens, _ttft(miss), _ttft(first), _ttft(hit), hit.cpu_hit_tokens)


def batch_throughput(n: int, prompt_tokens: int, hit_share: float, cpu_gib: float | None, seed: int = 0,
                     **flags: Any) -> tuple[float, float]:
    """(prompt tokens per modelled second, share of prompt tokens served by the CPU tier) of ``n`` unique prompts
    submitted at once with GPU prefix caching off. ``round(hit_share x n)`` of them, drawn with ``seed``, are run
    once beforehand to warm the CPU tier (the warm-up time is not counted, as in the blog's Figure 2)."""
    core = engine(enable_prefix_caching=False, kv_offloading_size=cpu_gib, **flags)
    prompts = [_prompt(i + 1, prompt_tokens) for i in range(n)]
    warm = sorted(random.Random(seed).sample(range(n), round(hit_share * n))) if cpu_gib else []
    for i in warm:
        core.add(core.new_request(f"warm{i}", prompts[i], 1, 1, 0.0))
    start = drive(core, 0.0) + 1.0
    reqs = [core.new_request(f"r{i}", prompts[i], 1, 1, start) for i in range(n)]
    for req in reqs:
        core.add(req)
    end = drive(core, start)
    total = n * prompt_tokens
    return total / (end - start), sum(r.cpu_hit_tokens for r in reqs) / total


def shared_prefix_run(families: int, prefix_tokens: int, requests: int, concurrency: int, cpu_gib: float | None,
                      seed: int = 1, suffix_tokens: int = 16, max_tokens: int = 8, **flags: Any) -> PrefixRun:
    """A closed loop of ``concurrency`` clients (no think time), each request a uniformly drawn family's shared
    prefix plus a unique suffix; GPU prefix caching on. The family sequence depends only on ``seed``, so arms with
    different tiers see the same requests."""
    core = engine(kv_offloading_size=cpu_gib, **flags)
    rng = random.Random(seed)
    now = 0.0
    reqs: list[SimRequest] = []
    active: list[SimRequest] = []
    while len(reqs) < requests or core.has_work():
        while len(reqs) < requests and len(active) < concurrency:
            k = len(reqs)
            ids = _prompt(rng.randrange(families) + 1, prefix_tokens)
            ids += [900_000_000 + k * 1000 + j for j in range(suffix_tokens)]
            req = core.new_request(f"r{k}", ids, max_tokens, 1, now)
            core.add(req)
            reqs.append(req)
            active.append(req)
        now = advance(core, now)
        active = [r for r in active if r.finished_at is None]
    prompt = sum(r.prompt_len for r in reqs)
    return PrefixRun(
        gpu_share=sum(r.gpu_hit_tokens for r in reqs) / prompt,
        cpu_share=sum(r.cpu_hit_tokens for r in reqs) / prompt,
        mean_ttft_s=sum(_ttft(r) for r in reqs) / len(reqs),
        requests=len(reqs),
    )


def gpu_kv_gib(**flags: Any) -> float:
    """The GPU KV cache ``serve`` with these flags would allocate, in GiB (vLLM's ``--kv-offloading-size`` unit)."""
    _opts, cfg, _banner = resolve_serve(flags)
    return cfg.kv_cache_bytes / 2**30


def report(profile: str = "h100-llama3-8b") -> list[str]:
    """The simulator next to the blog's Figures 1 and 2 (prompt lengths and loads as published)."""
    lines = [f"vLLM blog 2026-01-08 ({VLLM_BLOG_URL}) vs harness-sim profile {profile}",
             "prompt  recompute ms (pub / sim)  CPU hit ms (pub / sim)  ratio (pub / sim)"]
    for tokens, pub_rc, pub_hit in VLLM_BLOG_FIG1:
        p = single_request_ttft(tokens, 64.0, profile=profile)
        lines.append(f"{tokens:>7}  {pub_rc:7.0f} / {p.recompute_s * 1e3:7.0f}     {pub_hit:6.0f} / "
                     f"{p.cpu_hit_s * 1e3:6.1f}      {pub_rc / pub_hit:5.1f} / {p.ratio:5.1f}")
    base, _ = batch_throughput(1000, 512, 0.0, None, profile=profile)
    lines.append(f"512-token batch, no offload: {VLLM_BLOG_FIG2['no_offload']:.0f} / {base:.0f} tokens/s")
    for pct in (0, 50, 90, 100):
        tput, share = batch_throughput(1000, 512, pct / 100, 80.0, profile=profile)
        pub = VLLM_BLOG_FIG2[f"hit_{pct}"]
        lines.append(f"  CPU hit {pct:3d}% ({share:.0%} of tokens): {pub:.0f} / {tput:.0f} tokens/s; x "
                     f"{pub / VLLM_BLOG_FIG2['no_offload']:.2f} / {tput / base:.2f} vs no offload")
    return lines


if __name__ == "__main__":  # pragma: no cover - a report for people
    print("\n".join(report()))
