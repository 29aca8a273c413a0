"""The truth a coverage interval should hold: each measure's ratio on the pooled steady-state samples of long
rollouts, and its cache under ``--out``.

The truth of a case (noise seeds varied, per-launch drift off, so every launch has the same physics) is estimated from
rollouts many times longer than a bench step, pooled over several seeds: per step, the arm's and the baseline's
steady-state TTFT samples (:mod:`.samples`) are concatenated across seeds and the ratio of their quantiles taken;
throughput is the pooled output tokens over the pooled steady-state seconds, per arm. Ratios are read as
:func:`harness.decision.evidence.improvement` reads them: > 1 is better for the tier arm (baseline latency over the
arm's; the arm's throughput over the baseline's). Hand-written: pooling and a ratio (numpy's quantile, the same
definition the interval's point estimate uses).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from harness.decision.evidence import StepSample

F64 = npt.NDArray[np.float64]
Parts = tuple[F64, F64, float, float, float, float]  # what one rollout's step adds to a pool (StepPool.add's args)
MEASURES = ("ttft_p50", "ttft_p95", "output_tokens_per_s")
QUANTILE = {"ttft_p50": 0.50, "ttft_p95": 0.95}


@dataclass
class StepPool:
    """One step's pooled steady-state data of both arms over the truth rollouts."""

    arm_ttft: list[F64] = field(default_factory=list)
    base_ttft: list[F64] = field(default_factory=list)
    arm_tokens: float = 0.0
    arm_seconds: float = 0.0
    base_tokens: float = 0.0
    base_seconds: float = 0.0
    rollouts: int = 0

    def add(self, arm_ttft: F64, base_ttft: F64, arm_tokens: float, arm_seconds: float, base_tokens: float,
            base_seconds: float) -> None:
        """Add one rollout's step."""
        self.arm_ttft.append(np.asarray(arm_ttft, dtype=np.float64))
        self.base_ttft.append(np.asarray(base_ttft, dtype=np.float64))
        self.arm_tokens += float(arm_tokens)
        self.arm_seconds += float(arm_seconds)
        self.base_tokens += float(base_tokens)
        self.base_seconds += float(base_seconds)
        self.rollouts += 1

    def truth(self) -> dict[str, float]:
        """Each measure's pooled ratio (> 1: the arm is better); a measure with no data on a side is left out."""
        out: dict[str, float] = {}
        arm = _finite(self.arm_ttft)
        base = _finite(self.base_ttft)
        if len(arm) and len(base):
            for measure, q in QUANTILE.items():
                qa = float(np.quantile(arm, q))
                if qa > 0:
                    out[measure] = float(np.quantile(base, q)) / qa
        if self.arm_seconds > 0 and self.base_seconds > 0 and self.base_tokens > 0:
            out["output_tokens_per_s"] = (self.arm_tokens / self.arm_seconds) / (self.base_tokens / self.base_seconds)
        return out


def _finite(parts: list[F64]) -> F64:
    if not parts:
        return np.zeros(0)
    values = np.concatenate(parts)
    return values[np.isfinite(values)]


def step_parts(arm: StepSample, base: StepSample) -> Parts:
    """What one rollout's step adds to a :class:`StepPool` (the arguments of :meth:`StepPool.add`)."""
    return (arm.ttft, base.ttft, float(np.sum(arm.tokens)), arm.duration_s, float(np.sum(base.tokens)),
            base.duration_s)


def pool_truth(rollouts: Iterable[Mapping[int, Parts]]) -> dict[int, dict[str, float]]:
    """Step -> measure -> truth from the truth rollouts' :func:`step_parts` per step."""
    pools: dict[int, StepPool] = {}
    for steps in rollouts:
        for step, parts in steps.items():
            pools.setdefault(step, StepPool()).add(*parts)
    return {step: pool.truth() for step, pool in sorted(pools.items())}


def cache_path(out: Path, case: str, step_s: float, factor: float, seeds: int) -> Path:
    """Where a case's truth is cached (its key: the case, the step length, how much longer and how many seeds)."""
    return out / "truth" / f"{case}-step{step_s:g}s-x{factor:g}-seeds{seeds}.json"


def save_truth(path: Path, truth: Mapping[int, Mapping[str, float]], meta: Mapping[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"meta": dict(meta), "truth": {str(k): dict(v) for k, v in truth.items()}}
    path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")


def load_truth(path: Path) -> dict[int, dict[str, float]] | None:
    """A cached truth, or None when there is none (a file that does not parse is an error: remove it)."""
    if not path.exists():
        return None
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
        return {int(k): {m: float(v) for m, v in d.items()} for k, d in body["truth"].items()}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: not a truth cache ({exc}); remove it to recompute") from exc
