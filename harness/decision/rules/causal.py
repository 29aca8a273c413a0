"""Cause before credit: rules that stop a tier from being ``go`` when the mechanism that could help is absent.

* **own-tier hits** — the newest tier (the CPU tier of a ``cpu`` arm, the disk tier of a ``tiered`` arm) must have
  served hits at some step. Zero own-tier hit tokens at every step is a *breach*: any measured improvement is drift
  or noise, not the tier. Where the engine does not split hits by tier (TensorRT-LLM 1.0), the tier's contribution is
  inferred as the arm's cached tokens minus the arm-before's at the same step (same request plan), labelled as
  inferred; with no figure at all the rule is *unresolved*.
* **fit screen** — the "is offload the wrong optimisation?" items that say no tier can help (prefixes do not come
  back, GPU memory is not the limit) hold a tier that would otherwise be ``go``.

Both are holds, never vetoes: they say the evidence for shipping is missing, not that the tier harmed anything.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.config.arms import Arm
from harness.schema.summary import FitItem, RuleResult, StepSummary

BLOCKING_FIT_ITEMS = ("prefixes-come-back", "gpu-memory-is-the-limit")


def _own(step: StepSummary, tier: str) -> int | None:
    return step.hit_tokens.cpu if tier == "cpu" else step.hit_tokens.disk


def own_tier_hits(arm: Arm, steps: Sequence[StepSummary], prev_steps: Sequence[StepSummary],
                  prev_name: str) -> RuleResult:
    """Did the arm's newest tier serve any hits?"""
    tier = "cpu" if arm.tier == "cpu" else "disk"
    measured = [(s, _own(s, tier)) for s in steps]
    known = [(s, v) for s, v in measured if v is not None]
    if known:
        total = sum(v for _, v in known)
        per = ", ".join(f"step {s.index} {v}" for s, v in known)
        if total > 0:
            return RuleResult(rule="own-tier-hits", kind="causal", status="pass",
                              message=f"the {tier} tier served {total} hit tokens ({per})")
        return RuleResult(rule="own-tier-hits", kind="causal", status="breach",
                          message=f"the {tier} tier served no hits at any step ({per} tokens): there is no causal "
                          "path for an improvement, so none can be credited to it")
    inferred = _inferred(steps, prev_steps)
    if inferred is not None:
        total, per = inferred
        status = "pass" if total > 0 else "breach"
        return RuleResult(rule="own-tier-hits", kind="causal", status=status,
                          message=f"INFERRED (the engine does not split hits by tier): cached tokens beyond "
                          f"{prev_name}'s at the same steps: {total} ({per})"
                          + ("" if total > 0 else "; no extra reuse, so no causal path for an improvement"))
    return RuleResult(rule="own-tier-hits", kind="causal", status="unresolved",
                      message=f"the {tier} tier's hits were not exposed and cannot be inferred (no cached-token "
                      "counts): whether the tier did anything cannot be verified")


def _inferred(steps: Sequence[StepSummary], prev_steps: Sequence[StepSummary]) -> tuple[int, str] | None:
    prev = {s.index: s for s in prev_steps}
    parts: list[tuple[int, int]] = []
    for step in steps:
        other = prev.get(step.index)
        mine = step.hit_tokens.cached if step.hit_tokens.cached is not None else step.client_cached_tokens
        theirs = None if other is None else (other.hit_tokens.cached if other.hit_tokens.cached is not None
                                             else other.client_cached_tokens)
        if mine is None or theirs is None or step.requests == 0 or other is None or other.requests == 0:
            continue
        # Per request, so a step that served more requests is not credited for its volume.
        extra = mine / step.requests - theirs / other.requests
        parts.append((step.index, round(max(0.0, extra) * step.requests)))
    if not parts:
        return None
    return sum(v for _, v in parts), ", ".join(f"step {i} {v}" for i, v in parts)


def fit_rule(items: Sequence[FitItem]) -> RuleResult:
    """Fit-screen warnings that say no tier can help."""
    blocking = [i for i in items if i.name in BLOCKING_FIT_ITEMS and i.status == "warn"]
    if blocking:
        return RuleResult(rule="fit-screen", kind="fit", status="breach",
                          message="the fit screen says offload is the wrong optimisation here: "
                          + "; ".join(f"{i.name}: {i.evidence}" for i in blocking))
    return RuleResult(rule="fit-screen", kind="fit", status="pass",
                      message="no fit-screen item says a tier cannot help")
