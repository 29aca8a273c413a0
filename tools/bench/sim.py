"""Benchmark: the highest streamed tokens/s the simulator sustains on one CPU core.

``python -m tools.bench.sim [--seconds 5] [--concurrency 16,64,256] [--max-tokens 256]``

The simulator runs as a subprocess pinned to one core (``os.sched_setaffinity``) with the ``h200-llama3-8b``
profile and a time scale of 1e-6, so modelled step times are negligible and the host CPU is the only limit.
The load generator (aiohttp, on another core when there is one) keeps ``concurrency`` streaming completions
open (short prompt, ``max_tokens`` tokens each, a connection per request) and counts the SSE token events it
receives. For each concurrency it prints tokens/s, the simulator's CPU use, and tokens per simulator
CPU-second (what a fully free core would sustain, when the core is shared with other work); the last line is
the best measured figure. Not a pytest test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

import psutil

from tests.support.sim import running_sim


def _pin(cpu: int | None) -> None:
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {cpu})


async def stream_once(port: int, request: bytes, counts: list[int], timeout_s: float = 30.0) -> None:
    """One streamed request on its own connection (``Connection: close``); adds its token events to ``counts[0]``."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        tail = b""
        while True:
            data = await asyncio.wait_for(reader.read(1 << 16), timeout=timeout_s)
            if not data:
                break
            buf = tail + data
            counts[0] += buf.count(b"data: {")
            tail = buf[-6:]  # shorter than the marker: no match is counted twice
    finally:
        writer.close()


async def _worker(port: int, request: bytes, stop_at: float, counts: list[int]) -> None:
    """Back-to-back streamed requests, one connection each; counts token events."""
    while time.perf_counter() < stop_at:
        await stream_once(port, request, counts)


async def _measure(port: int, concurrency: int, seconds: float, max_tokens: int) -> tuple[float, float]:
    """(tokens/s, wall seconds) over ``seconds`` after a 1 s warm-up."""
    body = json.dumps({"model": "sim-model", "prompt": "benchmark prompt with a few words",
                       "max_tokens": max_tokens, "stream": True}).encode()
    request = (f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body
    warm = [0]
    await asyncio.gather(*(_worker(port, request, time.perf_counter() + 1.0, warm) for _ in range(concurrency)))
    counts = [0]
    t0 = time.perf_counter()
    await asyncio.gather(*(_worker(port, request, t0 + seconds, counts) for _ in range(concurrency)))
    wall = time.perf_counter() - t0
    return counts[0] / wall, wall


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.bench.sim", description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="measurement time per concurrency level")
    ap.add_argument("--concurrency", default="16,64,256", help="comma-separated concurrency levels")
    ap.add_argument("--max-tokens", type=int, default=256)
    args = ap.parse_args(argv)
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    sim_cpu = cpus[0] if cpus else None
    client_cpu = cpus[1] if len(cpus) > 1 else None
    if client_cpu is None:
        print("warning: one CPU only; the load generator shares the simulator's core", file=sys.stderr)
    levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    best = 0.0
    with running_sim(profile="h200-llama3-8b", time_scale=1e-6, max_num_seqs=max(levels)) as sim:
        assert sim.process is not None
        if sim_cpu is not None and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(sim.process.pid, {sim_cpu})
        _pin(client_cpu)
        proc = psutil.Process(sim.process.pid)
        print(f"simulator pid {sim.process.pid} on cpu {sim_cpu}; load generator on cpu {client_cpu}")
        for level in levels:
            before = proc.cpu_times()
            mine = os.times()
            rate, wall = asyncio.run(_measure(sim.port, level, args.seconds, args.max_tokens))
            after = proc.cpu_times()
            mine_after = os.times()
            client = (mine_after.user - mine.user + mine_after.system - mine.system) / (wall + 1.0)
            cpu_s = (after.user - before.user) + (after.system - before.system)
            share = cpu_s / (wall + 1.0)  # the CPU times include the 1 s warm-up
            per_cpu_s = rate / share if share > 0 else float("nan")
            print(f"concurrency {level:4d}: {rate:9.0f} streamed tokens/s, simulator CPU {100 * share:5.1f}% "
                  f"of its core -> {per_cpu_s:9.0f} tokens per simulator CPU-second (load generator CPU "
                  f"{100 * client:5.1f}%)")
            best = max(best, rate)
    print(f"best: {best:.0f} streamed tokens/s with the simulator on one core")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
