"""Helpers for the load generator's integration tests (the simulator over real loopback sockets)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from harness.config.steps import StepLevel
from harness.config.workload import WorkloadSpec
from harness.load.step import StepRun
from harness.workload.tokens import TokenCalibration

SHORT_LONG: dict[str, Any] = {
    "seed": 5,
    "classes": [
        {"name": "short", "weight": 3, "prompt_tokens": {"min": 200, "max": 800},
         "output_tokens": {"min": 16, "max": 48}},
        {"name": "long", "weight": 1, "prompt_tokens": {"min": 2000, "max": 4000},
         "output_tokens": {"min": 16, "max": 48}},
    ],
    "reuse": {"system_prompts": {"families": 4, "tokens": 160}},
}


def step_run(base_url: str, records: Path, level: StepLevel, index: int, *, workload: WorkloadSpec | None = None,
             calibration: TokenCalibration | None = None, **over: Any) -> StepRun:
    """A StepRun against a simulator with short timeouts."""
    args: dict[str, Any] = {
        "base_url": base_url, "served_model": "sim-model",
        "workload": workload or WorkloadSpec.model_validate(SHORT_LONG),
        "level": level, "step_index": index, "step_label": level.label, "arm": "gpu-only", "records_dir": records,
        "request_timeout_s": 60.0, "stream_idle_timeout_s": 10.0, "drain_timeout_s": 10.0,
        "max_model_len": calibration.max_model_len if calibration else None, "tokenizer": calibration,
    }
    args.update(over)
    return StepRun(**args)


def big_kv_profile(tmp: Path) -> Path:
    """The demo profile with small weights: ~200k tokens of GPU KV, so nothing is evicted in a short test."""
    demo = Path(__file__).resolve().parents[3] / "harness" / "sim" / "profiles" / "demo.yaml"
    data = yaml.safe_load(demo.read_text(encoding="utf-8"))
    data["name"] = "demo-big-kv"
    data["gpu"]["weights_bytes"] = 10_000_000_000
    path = tmp / "big-kv.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def mooncake_trace(n: int, seed: int, *, block: int = 512, max_blocks: int = 7) -> list[dict[str, Any]]:
    """A small Mooncake-format trace made from the format description: ``timestamp`` (ms), ``input_length``,
    ``output_length``, ``hash_ids`` (one id per 512-token block, the last one partial). Prompts are a system
    prompt (3 families of 1-2 blocks), often a document (5 documents of 1-3 blocks), then 1-2 new blocks."""
    import random

    rng = random.Random(seed)
    next_id = 1000
    families = [[rng.randrange(10**6) + i * 10**6 for i in range(rng.randint(1, 2))] for _ in range(3)]
    documents = [[rng.randrange(10**6) + 10**8 + i * 10**6 for i in range(rng.randint(1, 3))] for _ in range(5)]
    rows, ts = [], 0
    for _ in range(n):
        ids = list(families[min(int(rng.expovariate(1.0)), 2)])
        if rng.random() < 0.6:
            ids += documents[min(int(rng.expovariate(0.7)), 4)]
        tail = rng.randint(1, 2)
        ids += list(range(next_id, next_id + tail))
        next_id += tail
        ids = ids[:max_blocks]
        ts += rng.randint(0, 400)
        rows.append({"timestamp": ts, "input_length": (len(ids) - 1) * block + rng.randint(1, block - 1),
                     "output_length": rng.randint(2, 6), "hash_ids": ids})
    return rows


def shared_blocks(rows: list[dict[str, Any]]) -> list[int]:
    """For each request: the longest run of leading hash_ids it shares with any earlier request (blocks)."""
    out = []
    for i, row in enumerate(rows):
        best = 0
        for prev in rows[:i]:
            n = 0
            for a, b in zip(row["hash_ids"], prev["hash_ids"], strict=False):
                if a != b:
                    break
                n += 1
            best = max(best, n)
        out.append(best)
    return out
