"""The truth a coverage interval should hold, how sure the benchmark is of it, and its cache under ``--out``.

**The estimand.** A rollout's interval claims the ratio of the two arms' steady-state distributions for the step
design the rollout ran: the same scenario (step lengths, load levels, warm-up, plan), the same MSER-5 warm-up cut
(:mod:`harness.analysis.steady`), noise seeds varied. The quantile ratios are of the steady-state TTFT distributions
(baseline over arm, so > 1 is better for the tier arm, as :func:`harness.decision.evidence.improvement` reads them);
throughput is steady-state output tokens per second (the arm's over the baseline's).

**Its estimate.** The truth of a case is taken from truth rollouts of that same design (``--truth-factor 1``, the
default) over many independent seeds (``--truth-seeds``, seeds disjoint from the coverage rollouts'), per-launch
drift off so every launch has the same physics: per step, the arm's and the baseline's steady-state TTFT samples
(:mod:`.samples`) are concatenated across seeds and the ratio of their quantiles taken; throughput is the pooled
output tokens over the pooled steady-state seconds, per arm. Pooling weights each rollout by its steady-state
sample, as a rollout's own interval does. Longer truth steps (``--truth-factor`` > 1) estimate another quantity —
a steady state with fuller caches and a different share of the warm-up — and are kept only to show that
(docs/statistics.md, "Calibration"). The truth's own standard error is the bootstrap over the truth rollouts
(``scipy.stats.bootstrap``, rollouts resampled with replacement): a check that the truth is far tighter than one
rollout's interval.

The cache is keyed by the case, the step length, the factor, the seed count and a hash of the case's scenario (noise
seeds set to 0), so a change of the case's physics never reuses an old truth. Hand-written: pooling and a ratio
(numpy's quantile, the same definition the interval's point estimate uses).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from harness.decision.evidence import StepSample

F64 = npt.NDArray[np.float64]
Parts = tuple[F64, F64, float, float, float, float]  # what one rollout's step adds to a pool (StepPool.add's args)
Rollout = Mapping[int, Parts]  # step -> its parts
MEASURES = ("ttft_p50", "ttft_p95", "output_tokens_per_s")
QUANTILE = {"ttft_p50": 0.50, "ttft_p95": 0.95}
SE_RESAMPLES = 200


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


def pool_truth(rollouts: Iterable[Rollout]) -> dict[int, dict[str, float]]:
    """Step -> measure -> truth from the truth rollouts' :func:`step_parts` per step."""
    pools: dict[int, StepPool] = {}
    for steps in rollouts:
        for step, parts in steps.items():
            pools.setdefault(step, StepPool()).add(*parts)
    return {step: pool.truth() for step, pool in sorted(pools.items())}


def truth_se(rollouts: Sequence[Rollout], truth: Mapping[int, Mapping[str, float]],
             resamples: int = SE_RESAMPLES) -> dict[int, dict[str, float]]:
    """Step -> measure -> the standard error of the pooled truth: ``scipy.stats.bootstrap`` over the rollouts
    (resampled whole, with replacement; seeded, so a cache is reproducible). Under two rollouts: no error (nan)."""
    if len(rollouts) < 2:
        return {step: {m: math.nan for m in row} for step, row in truth.items()}
    from scipy.stats import bootstrap

    out: dict[int, dict[str, float]] = {}
    for step, row in truth.items():
        out[step] = {}
        for measure in row:
            def statistic(idx: F64, step: int = step, measure: str = measure) -> float:
                pooled = pool_truth([{step: rollouts[int(i)][step]} for i in idx if step in rollouts[int(i)]])
                return pooled.get(step, {}).get(measure, math.nan)

            res = bootstrap((np.arange(len(rollouts), dtype=np.float64),), statistic, vectorized=False,
                            n_resamples=resamples, method="percentile", random_state=0)
            out[step][measure] = float(res.standard_error)
    return out


def design_key(scenario: Mapping[str, Any]) -> str:
    """A short hash of a truth rollout's scenario (built with seed 0): the physics and design the truth is of."""
    return hashlib.sha256(json.dumps(scenario, sort_keys=True).encode()).hexdigest()[:10]


def cache_path(out: Path, case: str, step_s: float, factor: float, seeds: int, key: str) -> Path:
    """Where a case's truth is cached (its key: the case, the step length, how much longer, how many seeds and the
    scenario's :func:`design_key`)."""
    return out / "truth" / f"{case}-step{step_s:g}s-x{factor:g}-seeds{seeds}-{key}.json"


@dataclass(frozen=True)
class Truth:
    """A case's truth per step and measure, with its standard error."""

    values: dict[int, dict[str, float]]
    se: dict[int, dict[str, float]]

    def of(self, step: int, measure: str) -> tuple[float | None, float | None]:
        """The truth and its standard error (None where the truth has no such step or measure)."""
        value = self.values.get(step, {}).get(measure)
        se = self.se.get(step, {}).get(measure)
        return value, (None if se is None or not math.isfinite(se) else se)


def save_truth(path: Path, truth: Truth, meta: Mapping[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"meta": dict(meta), "truth": {str(k): dict(v) for k, v in truth.values.items()},
            "se": {str(k): {m: (None if not math.isfinite(x) else x) for m, x in v.items()}
                   for k, v in truth.se.items()}}
    path.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")


def load_truth(path: Path) -> Truth | None:
    """A cached truth, or None when there is none (a file that does not parse is an error: remove it)."""
    if not path.exists():
        return None
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
        values = {int(k): {m: float(v) for m, v in d.items()} for k, d in body["truth"].items()}
        se = {int(k): {m: (math.nan if v is None else float(v)) for m, v in d.items()}
              for k, d in body.get("se", {}).items()}
        return Truth(values, se)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: not a truth cache ({exc}); remove it to recompute") from exc
