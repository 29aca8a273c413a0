"""The decision benchmark's known-answer cases: scenarios built from the demo's workload on the simulator.

Every case is a real rollout (simulator servers, the load generator, scraping, the rules) with seeded noise on
(per-step jitter and per-run drift, see harness/sim/README.md) and a known truth:

* ``aa-floor`` — the same with the baseline re-run at the end (the A/A noise floor on);
* ``aa`` — an inert CPU tier (two blocks: physically the same as the baseline): any ``go`` is a false go (one load
  level, so that the many A/A rollouts fit in the benchmark's time);
* ``benefit`` — the demo's 16 GiB CPU tier, a real benefit: ``go`` is the right answer (run twice: sequential
  steps and fixed horizon, for the load-time comparison at the same error rates);
* ``tail`` — a disk tier whose reads sometimes stall (a slow-disk tail) behind a 2 GiB CPU tier (the least that
  stages a step's store offer, as vLLM 0.32 needs): p99 TTFT rises; the fs tier's asynchronous lookup also costs
  the median an engine step, so Mann-Whitney sees it too; ``go`` is wrong.

Every case runs on the virtual clock (``engine.sim_clock: virtual``, docs/virtual-clock.md) by default: modelled
time 1.0 and unscaled budgets, the rollout in process and as fast as the host computes it. ``real_time=True`` is the
old path: simulator servers in real time, faster than modelled time (``time_scale``) so many rollouts fit in a
benchmark run, budgets scaled by the same factor. Only physics is set here; nothing in a case says what the verdict
should be except the case's documented truth, which the benchmark compares with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

GIB = 2**30
TIME_SCALE = 0.3
INERT_TIER_GIB = 4 * 2**20 / GIB  # two blocks of 16 tokens x 128 KiB: holds nothing useful
# The tail case's CPU tier: vLLM 0.32 stages every fs write and read through it and stores a step's offer whole or
# not at all, so it must hold one step's prefill (8192 tokens x 128 KiB = 1 GiB); at 2 GiB it keeps under 2/3 of the
# 3 GiB of shared prefixes, so the disk still serves reads.
TAIL_CPU_BYTES = 2 << 30


@dataclass(frozen=True)
class Case:
    """One known-answer case."""

    name: str
    truth: str  # what the right verdict is, in words
    bad_verdicts: tuple[str, ...]  # verdicts that count as errors for this case
    sequential: bool


CASES = {
    "aa": Case("aa", "no effect (inert tier): go is a false go", ("go",), True),
    "aa-floor": Case("aa-floor", "the same, with the baseline re-run (A/A noise floor)", ("go",), True),
    "benefit": Case("benefit", "a real CPU-tier benefit: go is right", ("no-go",), True),
    "benefit-fixed": Case("benefit-fixed", "the same, fixed-horizon steps", ("no-go",), False),
    "tail": Case("tail", "a slow-disk tail regression (p99 up; the median pays the fs lookup): go is wrong",
                 ("go",), True),
}


RUN_DRIFT = 0.05  # per-launch drift of the decision cases (the realistic noise the A/A noise floor is for)
STEP_JITTER = 0.1


def time_scale(real_time: bool) -> float:
    """Modelled time over clock time: 1.0 on the virtual clock (its speed is the host's), else :data:`TIME_SCALE`."""
    return TIME_SCALE if real_time else 1.0


def _engine(seed: int, real_time: bool, run_drift: float) -> dict[str, Any]:
    engine: dict[str, Any] = {
        "kind": "sim", "launcher": "process", "model": "meta-llama/Llama-3.1-8B-Instruct",
        "served_model_name": "bench-8b", "sim_profile": "h200-llama3-8b", "sim_time_scale": time_scale(real_time),
        "gpu_memory_utilization": 0.145, "max_model_len": 8192, "max_num_seqs": 256, "port": 0,
        "readiness_timeout_s": 60,
        "sim_noise": {"seed": seed, "step_jitter": STEP_JITTER, "run_drift": run_drift, "drift_per_hour": 0.0}}
    if not real_time:
        engine["sim_clock"] = "virtual"
    return engine


def _arms(case: str, disk_dir: str) -> list[dict[str, Any]]:
    base = {"name": "baseline", "tier": "gpu-only"}
    if case.startswith("aa"):
        return [base, {"name": "cpu-inert", "tier": "cpu",
                       "offload": {"kind": "vllm-native", "kv_offloading_size_gib": INERT_TIER_GIB}}]
    if case.startswith("benefit"):
        return [base, {"name": "cpu-16g", "tier": "cpu",
                       "offload": {"kind": "vllm-native", "kv_offloading_size_gib": 16}}]
    return [base, {"name": "slow-disk", "tier": "tiered",
                   "offload": {"kind": "vllm-connector", "spec_name": "TieringOffloadingSpec",
                               "cpu_bytes_to_use": TAIL_CPU_BYTES,
                               "secondary_tiers": [{"type": "fs", "root_dir": disk_dir, "size_gib": 64}]}}]


def scenario(case: str, seed: int, disk_dir: str, step_s: float,
             design: dict[str, Any] | None = None, *, real_time: bool = False, run_drift: float = RUN_DRIFT,
             sequential: bool | None = None) -> dict[str, Any]:
    """The scenario of one rollout of ``case`` with noise and workload seeded by ``seed`` (``design``: sequential
    settings, e.g. ``looks``, over the defaults). ``real_time``: the old path (simulator servers, scaled time);
    ``run_drift``: the per-launch drift (0 for coverage rollouts, whose truth must not move from launch to launch);
    ``sequential``: override the case's sequential steps (off: fixed-horizon steps)."""
    info = CASES[case]
    engine = _engine(seed, real_time, run_drift)
    scale = time_scale(real_time)
    seq = info.sequential if sequential is None else sequential
    if case == "tail":
        # A slow-disk tail: reads of the fs tier sometimes stall (seeded by the noise seed); physics only.
        engine["sim_args"] = ["--disk-read-tail-prob", "0.02", "--disk-read-tail-factor", "25"]
    return {
        "name": f"decision-bench-{case}",
        "description": f"decision benchmark case {case}: {info.truth}",
        "engine": engine,
        "arms": _arms(case, disk_dir),
        "workload": {
            "seed": seed, "api": "chat",
            "classes": [
                {"name": "short", "weight": 0.6, "prompt_tokens": {"min": 400, "max": 1200},
                 "output_tokens": {"min": 8, "max": 24}},
                {"name": "long", "weight": 0.4, "prompt_tokens": {"min": 1200, "max": 2400},
                 "output_tokens": {"min": 8, "max": 24}}],
            "reuse": {"system_prompts": {"families": 24, "tokens": 1024, "zipf_s": 0.6}, "unique_fraction": 0.1},
        },
        "steps": {"warmup": {"duration_s": 2, "concurrency": 4},
                  "levels": ([{"concurrency": 24, "duration_s": step_s}] if case.startswith("aa") else
                             [{"concurrency": 12, "duration_s": step_s}, {"concurrency": 32, "duration_s": step_s}]),
                  "scrape_interval_s": 1, "stream_idle_timeout_s": 30, "drain_timeout_s": 10,
                  "sequential": {"enabled": seq, "looks": 4, "min_fraction": 0.25, **(design or {})}},
        "slo": {"ttft_p99_ms": 8000 * scale, "itl_p99_ms": 1500 * scale},
        "rules": {"window_s": 5, "min_requests_per_window": 3,
                  "noise_floor": {"rerun_baseline": case == "aa-floor"},
                  "budgets": [{"metric": "ttft", "breach_windows": 3, "of_last": 5, "critical": True}],
                  "regression": [{"metric": "ttft", "percentile": 99, "max_ratio": 1.10, "min_samples": 20}],
                  "earns_keep": {"measures": ["ttft_p95", "output_tokens_per_s"], "min_improvement": 1.05,
                                 "min_samples": 10}},
        "checks": {"host_reserve_gib": 2, "kv_bytes_per_token": 131072, "host_to_device_gbps": 50},
    }
