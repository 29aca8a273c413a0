"""Benchmark: the simulator's own CPU per 1,000 streamed tokens at the demo's load, per tier (GPU, CPU, CPU + disk).

``python -m tools.bench.sim_arms [--seconds 12] [--warmup 3] [--concurrency 32] [--arms gpu-only,cpu,tiered]``

Each arm's simulator runs as ``scenarios/demo-sim.yaml`` starts it (profile ``h200-llama3-8b`` at 14.5% of the GPU's
memory, time scale 1: modelled real time, no noise): ``cpu`` adds the demo's 16 GiB CPU tier, ``tiered`` the same
CPU tier through vLLM's ``TieringOffloadingSpec`` plus the fs tier in a temporary directory, capped at 64 GiB as the
demo's. The simulator is pinned to one core, the load generator (aiohttp-free raw sockets, on another core when
there is one) keeps ``concurrency`` streamed completions open: the demo's prompts (60% of 400-1,200 words, 40% of
1,200-2,400; one of 24 shared 1,024-word prefixes, Zipf 0.6, cut to fit, 10% without one, then words of the request's
own) and 16 output tokens each (the demo's 8-24). Over the
window after the warm-up it reads the simulator's CPU time (user + system) and its ``behind_s`` (``GET
/admin/state``: how far the simulator fell behind the wall clock, its own CPU showing as modelled time) and prints
per arm: streamed tokens, simulator CPU seconds per 1,000 of them, and behind seconds per wall second. Not a pytest
test; ``make perf`` quotes it (section 4).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

from tests.support.sim import running_sim
from tools.bench.sim import stream_once

ARMS = ("gpu-only", "cpu", "tiered")
FAMILIES, PREFIX_WORDS, ZIPF_S, UNIQUE_FRACTION = 24, 1024, 0.6, 0.1
CLASSES = ((0.6, 400, 1200), (0.4, 1200, 2400))  # (weight, prompt words min, max): the demo's short and long
MIN_OWN_WORDS = 8
OUTPUT_TOKENS = 16  # the demo's 8-24, on average
GIB = 1 << 30


def arm_flags(arm: str, tier_dir: Path) -> dict[str, Any]:
    """``serve`` keyword flags of an arm, as the demo scenario launches it (noise off)."""
    flags: dict[str, Any] = {"profile": "h200-llama3-8b", "gpu_memory_utilization": 0.145, "max_model_len": 8192,
                             "max_num_seqs": 256, "time_scale": 1.0}
    if arm == "cpu":
        flags.update(kv_offloading_size=16, kv_offloading_backend="native")
    elif arm == "tiered":
        flags["kv_transfer_config"] = json.dumps({
            "kv_connector": "OffloadingConnector", "kv_role": "kv_both",
            "kv_connector_extra_config": {
                "spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": 16 * GIB, "eviction_policy": "lru",
                "secondary_tiers": [{"type": "fs", "root_dir": str(tier_dir), "n_read_threads": 16,
                                     "n_write_threads": 16}]}})
        flags["disk_tier_max_bytes"] = 64 * GIB
    elif arm != "gpu-only":
        raise ValueError(f"unknown arm {arm!r} (one of {', '.join(ARMS)})")
    return flags


class Prompts:
    """Demo-like prompts: a shared prefix (or none), then words of the request's own."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.prefixes = [[f"f{f}w{i}" for i in range(PREFIX_WORDS)] for f in range(FAMILIES)]
        self.weights = [1.0 / (k + 1) ** ZIPF_S for k in range(FAMILIES)]
        self.serial = 0

    def next(self) -> str:
        """A prompt of the demo's length: the family's prefix, cut to fit, then the request's own words."""
        rng = self.rng
        self.serial += 1
        lo, hi = CLASSES[0][1:] if rng.random() < CLASSES[0][0] else CLASSES[1][1:]
        total = rng.randint(lo, hi)
        shared = 0 if rng.random() < UNIQUE_FRACTION else min(PREFIX_WORDS, total - MIN_OWN_WORDS)
        own = [f"r{self.serial}w{i}" for i in range(total - shared)]
        if not shared:
            return " ".join(own)
        family = rng.choices(range(FAMILIES), self.weights)[0]
        return " ".join(self.prefixes[family][:shared] + own)


def _request(port: int, prompt: str) -> bytes:
    body = json.dumps({"model": "sim-model", "prompt": prompt, "max_tokens": OUTPUT_TOKENS, "stream": True,
                       "ignore_eos": True}).encode()
    return (f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


async def _worker(port: int, prompts: Prompts, stop_at: float, counts: list[int]) -> None:
    """Back-to-back streamed requests, one connection each; counts token events and requests."""
    while time.perf_counter() < stop_at:
        await stream_once(port, _request(port, prompts.next()), counts, timeout_s=60.0)
        counts[1] += 1


async def _load(port: int, prompts: Prompts, concurrency: int, seconds: float) -> tuple[int, int]:
    counts = [0, 0]
    stop_at = time.perf_counter() + seconds
    await asyncio.gather(*(_worker(port, prompts, stop_at, counts) for _ in range(concurrency)))
    return counts[0], counts[1]


def _behind(base_url: str) -> float:
    return float(httpx.get(base_url + "/admin/state", timeout=10, trust_env=False).json()["behind_s"])


def measure_arm(arm: str, seconds: float, warmup: float, concurrency: int, sim_cpu: int | None,
                client_cpu: int | None) -> str:
    """One arm: the line this bench prints for it."""
    with tempfile.TemporaryDirectory(prefix="harness-bench-tier-") as tier_dir, \
            running_sim(**arm_flags(arm, Path(tier_dir))) as sim:
        assert sim.process is not None
        if sim_cpu is not None and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(sim.process.pid, {sim_cpu})
        if client_cpu is not None and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {client_cpu})
        proc = psutil.Process(sim.process.pid)
        prompts = Prompts(seed=42)
        asyncio.run(_load(sim.port, prompts, concurrency, warmup))
        before, behind0, t0 = proc.cpu_times(), _behind(sim.base_url), time.perf_counter()
        tokens, requests = asyncio.run(_load(sim.port, prompts, concurrency, seconds))
        wall = time.perf_counter() - t0  # the last requests started before the end run past it
        after, behind1 = proc.cpu_times(), _behind(sim.base_url)
    cpu_s = (after.user - before.user) + (after.system - before.system)
    per_1k = 1000.0 * cpu_s / tokens if tokens else float("nan")
    return (f"arm {arm}: {tokens} streamed tokens ({requests} requests) in {wall:.1f} s, simulator CPU "
            f"{cpu_s:.2f} s ({100 * cpu_s / wall:.1f}% of its core) -> {per_1k:.4f} simulator CPU s per 1,000 "
            f"streamed tokens; behind the wall clock {behind1 - behind0:.3f} s "
            f"({100 * (behind1 - behind0) / wall:.2f}% of the window)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.bench.sim_arms", description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=12.0, help="measurement window per arm (after the warm-up)")
    ap.add_argument("--warmup", type=float, default=3.0, help="load before the window (caches fill)")
    ap.add_argument("--concurrency", type=int, default=32, help="streams (the demo's largest step: 32)")
    ap.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, of {', '.join(ARMS)}")
    args = ap.parse_args(argv)
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown or not arms:
        print(f"error: --arms: unknown arm(s) {', '.join(unknown) or '(none)'} (one of {', '.join(ARMS)})",
              file=sys.stderr)
        return 2
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    sim_cpu = cpus[0] if cpus else None
    client_cpu = cpus[1] if len(cpus) > 1 else None
    print(f"simulator on cpu {sim_cpu}; load generator on cpu {client_cpu}; {args.concurrency} streams, "
          f"{OUTPUT_TOKENS} tokens each, window {args.seconds:g} s after {args.warmup:g} s")
    for arm in arms:
        print(measure_arm(arm, args.seconds, args.warmup, args.concurrency, sim_cpu, client_cpu), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
