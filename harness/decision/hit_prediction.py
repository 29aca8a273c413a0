"""Proof of use: each tier arm's predicted hit shares per step next to the measured ones, and a fit-screen warning
where they disagree by more than :data:`HIT_BOUND` allows.

The prediction (:mod:`harness.workload.hit_prediction`) runs on the request records' plan block hashes (the
``hash_ids`` every record carries, in send order, warm-up first) at the capacities the arm resolved to: the GPU KV
cache its server reported (``vllm:cache_config_info``), the CPU tier as the engine resolved it (validation.json) or
as planned, the disk tier's planned ``size_gib``, all in tokens through the model's KV bytes per token. The measured
shares are the step's server hit counters over its prompt tokens (:class:`~harness.schema.summary.HitTokens`).

The screen (:func:`prediction_items`) holds each tier's measured share of a step to a bound that scales with the
prediction ``p``: ``max(relative x p, floor, z x sqrt(p (1 - p) / requests))`` (:func:`allowed_gap`). On the demo
(11 runs, 198 tier shares of 66 steps) every gap lies within 0.39 of this bound, and each of the 132 shares of 5% or
more would be flagged at half its prediction (docs/statistics.md, "Proof of state and of use"). The item is data
(:class:`~harness.schema.cold_start.HitCheck`); the report stage says it in words.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from pydantic import ValidationError

from harness.config.arms import GIB, Arm
from harness.config.scenario import Scenario
from harness.config.steps import StepLevel
from harness.decision.cold_start import CALIBRATION_EVENT, baseline_warning
from harness.decision.rules.fit import reported_blocks, resolved_tier
from harness.plan.checks.tier_capacity import kv_bytes_per_token, mirrors_gpu
from harness.rundir.entries import ArmEvent
from harness.rundir.records import WARMUP_STEP
from harness.schema.cold_start import (
    ColdStart,
    HitBound,
    HitCheck,
    HitPrediction,
    HitTier,
    PredictedStep,
    TierGap,
    TierShares,
)
from harness.schema.summary import ArmSummary, FitItem, StepSummary
from harness.schema.validation import ValidationRecord
from harness.workload.hit_prediction import (
    MODEL_TEXT,
    PlannedAccess,
    TierCapacity,
    block_hashes,
    predict_step_shares,
    sent_requests,
)
from harness.workload.plan import LoadConfigError, build_request_plan, step_tag
from harness.workload.replay import TraceLoadError
from harness.workload.requests import PlannedRequest
from harness.workload.tokens import TokenCalibration

HIT_BOUND = HitBound(relative=0.25, floor=0.02, z=3.0)
"""Measured and predicted shares further apart than this: a warning. ``relative`` 0.25: twice the largest relative
gap of a share of 5% or more on the demo (0.125; p95 0.079), half the gap of a share at half its prediction;
``floor`` 0.02 of prompt tokens: four times the largest gap of a smaller share (0.0053, the disk tier); ``z`` 3: the
demo's gaps are at most 1.8 binomial standard errors of a share over the step's requests, so a step of a few dozen
requests does not flag on noise."""
SOURCES: tuple[HitTier, ...] = ("gpu", "cpu", "disk")


def _capacity(scenario: Scenario, arm: Arm, steps: Sequence[StepSummary],
              validation: ValidationRecord | None) -> tuple[TierCapacity | None, list[str]]:
    reported = reported_blocks(steps)
    if reported is None:
        return None, ["the server reported no GPU KV cache size (vllm:cache_config_info)"]
    blocks, block_size = reported
    sources = [f"GPU {blocks} blocks x {block_size} tokens as the server reported them"]
    cpu_bytes, per_token, tier_source = resolved_tier(arm, validation)
    disk_bytes = int(sum((t.size_gib or 0.0) * GIB for t in arm.fs_tiers()))
    if (cpu_bytes or disk_bytes) and per_token is None:
        found = kv_bytes_per_token(scenario, arm)
        if found is None:
            return None, [*sources, "the model's KV bytes per token are not known (checks.kv_bytes_per_token)"]
        per_token = found[0]
        sources.append(f"KV {per_token} bytes/token from {found[1]}")
    cpu = cpu_bytes // per_token if cpu_bytes and per_token else 0
    disk = disk_bytes // per_token if disk_bytes and per_token else 0
    if cpu:
        sources.append(f"CPU tier {cpu} tokens {tier_source}")
    if disk:
        sources.append(f"disk tier {disk} tokens from the planned size_gib")
    elif arm.fs_tiers():
        sources.append("disk tier size not planned (size_gib): predicted as no disk tier")
    inclusive = mirrors_gpu(scenario.engine_for(arm), arm)  # vLLM's CPU tier stores what the GPU computes
    return TierCapacity(gpu_tokens=blocks * block_size, cpu_tokens=cpu, disk_tokens=disk,
                        mode="inclusive" if inclusive else "exclusive"), sources


def _rows(arm_df: pd.DataFrame) -> pd.DataFrame:
    """The arm's warm-up and step requests (no drills), in send order."""
    rows = arm_df[arm_df["step"] >= -1]
    if "drill" in rows:
        rows = rows[rows["drill"].isna()]
    return rows.sort_values("send_ns", kind="stable")


def _prompt_tokens(rows: pd.DataFrame) -> list[int]:
    prompt = rows["prompt_tokens"].where(rows["prompt_tokens"].notna(), rows["prompt_tokens_target"])
    return [int(p) if pd.notna(p) else 0 for p in prompt]


def _level(scenario: Scenario, step: int) -> StepLevel | None:
    if step == WARMUP_STEP:
        w = scenario.steps.warmup
        return StepLevel(concurrency=w.concurrency, duration_s=w.duration_s or None, requests=w.requests or None)
    levels = scenario.steps.levels
    return levels[step] if 0 <= step < len(levels) else None


def _from_plan(scenario: Scenario, arm: Arm, rows: pd.DataFrame, calib: TokenCalibration,
               block_tokens: int) -> list[PlannedAccess] | None:
    """Every request's prompt hashed at the server's block size, re-derived from the step's request plan (the same
    pure function of scenario, step and calibration that made it); None when a record is not in the plan."""
    planned: dict[int, dict[str, PlannedRequest]] = {}
    for step in sorted({int(v) for v in rows["step"]}):
        level = _level(scenario, step)
        if level is None:
            return None
        try:
            plan = build_request_plan(scenario.workload, level, step_index=step, calibration=calib,
                                      max_model_len=scenario.engine_for(arm).max_model_len)
        except (LoadConfigError, TraceLoadError, OSError):
            return None
        users = Counter(int(u) for u in rows.loc[rows["step"] == step, "user"])
        planned[step] = sent_requests(plan, users, sum(users.values()))
    out: list[PlannedAccess] = []
    for step, rid, prompt in zip(rows["step"], rows["request_id"], _prompt_tokens(rows), strict=True):
        req = planned[int(step)].get(str(rid).removeprefix(f"{arm.name}/{step_tag(int(step))}/"))
        if req is None:
            return None
        out.append(PlannedAccess(step=int(step), block_ids=block_hashes(req, block_tokens, calib),
                                 prompt_tokens=prompt))
    return out


def _accesses(scenario: Scenario, arm: Arm, arm_df: pd.DataFrame, calib: TokenCalibration | None,
              block_tokens: int) -> tuple[list[PlannedAccess], int, str] | None:
    """The arm's requests in send order, the block size they are hashed at and how (None: no hashes at all)."""
    if arm_df.empty or "hash_ids" not in arm_df or "hash_block_tokens" not in arm_df:
        return None
    rows = _rows(arm_df)
    if calib is not None:
        fine = _from_plan(scenario, arm, rows, calib, block_tokens)
        if fine is not None:
            return fine, block_tokens, (f"block hashes re-derived from the request plan at the server's "
                                        f"{block_tokens}-token blocks")
    sizes = {int(v) for v in rows["hash_block_tokens"].dropna() if int(v) > 0}
    if len(sizes) != 1:
        return None
    size = sizes.pop()
    out = [PlannedAccess(step=int(step), block_ids=[int(h) for h in (hashes if hashes is not None else [])],
                         prompt_tokens=prompt)
           for step, hashes, prompt in zip(rows["step"], rows["hash_ids"], _prompt_tokens(rows), strict=True)]
    return out, size, (f"COARSE: the records' plan hashes at {size}-token blocks (the tokenizer calibration was not "
                       "journaled, so the plan could not be re-derived at the server's block size)")


def _measured(step: StepSummary) -> TierShares:
    hits = step.hit_tokens
    parts: dict[str, Any] = {s: getattr(hits, s) for s in SOURCES}
    prompt = hits.prompt if hits.prompt is not None else None
    if not prompt:
        return TierShares()
    shares = {s: (v / prompt if v is not None else None) for s, v in parts.items()}
    known = [v for v in shares.values() if v is not None]
    return TierShares(**shares, miss=max(0.0, 1.0 - sum(known)) if len(known) == len(SOURCES) else None)


def hit_prediction(scenario: Scenario, arm: Arm, arm_df: pd.DataFrame, steps: Sequence[StepSummary],
                   validation: ValidationRecord | None, calib: TokenCalibration | None = None) -> HitPrediction | None:
    """Predicted against measured shares per step (None when the records carry no block hashes or the server
    reported no GPU KV cache size). ``calib``: the arm's journaled tokenizer calibration, to re-derive the plan."""
    capacity, sources = _capacity(scenario, arm, steps, validation)
    reported = reported_blocks(steps)
    if capacity is None or reported is None:
        return None
    accesses = _accesses(scenario, arm, arm_df, calib, reported[1])
    if accesses is None:
        return None
    requests, block_tokens, how = accesses
    sources.append(how)
    shares = predict_step_shares(requests, block_tokens, capacity)
    rows: list[PredictedStep] = []
    for step in steps:
        got = shares.get(step.index)
        if got is None:
            continue
        rows.append(PredictedStep(index=step.index, label=step.label, requests=got.requests,
                                  predicted=TierShares(gpu=got.gpu, cpu=got.cpu, disk=got.disk, miss=got.miss),
                                  measured=_measured(step)))
    return HitPrediction(model=MODEL_TEXT, mode=capacity.mode, block_tokens=block_tokens,
                         gpu_tokens=capacity.gpu_tokens, cpu_tokens=capacity.cpu_tokens,
                         disk_tokens=capacity.disk_tokens, sources=sources, steps=rows)


def allowed_gap(predicted: float, requests: int, bound: HitBound = HIT_BOUND) -> float:
    """The largest distance of a measured share from ``predicted`` (shares of a step's prompt tokens) that
    ``bound`` allows at a step of ``requests`` requests (see :class:`~harness.schema.cold_start.HitBound`)."""
    p = min(max(predicted, 0.0), 1.0)
    sampling = bound.z * math.sqrt(p * (1.0 - p) / requests) if requests > 0 else math.inf
    return max(bound.relative * p, bound.floor, sampling)


def tier_gaps(prediction: HitPrediction, bound: HitBound = HIT_BOUND) -> list[TierGap]:
    """Every tier share of every step further from its prediction than ``bound`` allows, in step order."""
    gaps: list[TierGap] = []
    for row in prediction.steps:
        for tier in SOURCES:
            want, got = getattr(row.predicted, tier), getattr(row.measured, tier)
            if want is None or got is None:
                continue
            allowed = allowed_gap(want, row.requests, bound)
            if abs(got - want) > allowed:
                gaps.append(TierGap(step=row.index, label=row.label, tier=tier, requests=row.requests,
                                    predicted=want, measured=got, bound=allowed))
    return gaps


def prediction_items(arm: str, prediction: HitPrediction | None, bound: HitBound = HIT_BOUND) -> list[FitItem]:
    """One ``hit-prediction-agrees`` item per arm with a prediction: ``warn`` where a tier's measured share of a
    step lies beyond its bound (:func:`allowed_gap`; reported, never deciding), with the figures as data."""
    if prediction is None or not prediction.steps:
        return []
    gaps = tier_gaps(prediction, bound)
    return [FitItem(name="hit-prediction-agrees", status="warn" if gaps else "pass",
                    hit_check=HitCheck(arm=arm, bound=bound, steps=len(prediction.steps), gaps=gaps))]


def calibration_of(events: Sequence[ArmEvent], arm: str) -> TokenCalibration | None:
    """The arm's latest journaled tokenizer calibration (``tokenizer`` event; None: none, or unreadable)."""
    found: TokenCalibration | None = None
    for event in events:
        if event.arm == arm and event.event == CALIBRATION_EVENT:
            try:
                found = TokenCalibration.model_validate(event.extra("calibration") or {})
            except ValidationError:
                found = None
    return found


@dataclass(frozen=True)
class Proven:
    """The arms with their ``cold_start`` and ``hit_prediction``, the fit items the predictions add, and the
    baseline's warm-start warning (if any)."""

    arms: list[ArmSummary]
    items: list[FitItem]
    warnings: list[str]


def with_proofs(scenario: Scenario, arms: Sequence[ArmSummary], all_df: pd.DataFrame,
                validation: ValidationRecord | None, proofs: Mapping[str, ColdStart | None],
                events: Sequence[ArmEvent]) -> Proven:
    """Every arm with its proof of state at the start and its predicted vs measured hits (copies)."""
    items: list[FitItem] = []
    by_name = {a.name: a for a in scenario.arms}
    out: list[ArmSummary] = []
    for summary in arms:
        rows = all_df[all_df["arm"] == summary.name] if not all_df.empty else all_df
        predicted = hit_prediction(scenario, by_name[summary.name], rows, summary.steps, validation,
                                   calibration_of(events, summary.name))
        out.append(summary.model_copy(update={"cold_start": proofs.get(summary.name), "hit_prediction": predicted}))
        if summary.tier != "gpu-only":
            items += prediction_items(summary.name, predicted)
    warm = baseline_warning(out[0].name, out[0].cold_start) if out else None
    return Proven(out, items, [warm] if warm is not None else [])
