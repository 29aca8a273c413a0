"""The fit screen's items in words: an item's own sentence, or, for an item made as data (``hit_check``: the
``hit-prediction-agrees`` screen of :mod:`harness.decision.hit_prediction`), words made here from its figures."""

from __future__ import annotations

from harness.report.fmt import num, pct
from harness.schema.cold_start import HitBound, HitCheck, TierGap
from harness.schema.summary import FitItem

TIER_WORDS = {"gpu": "GPU", "cpu": "CPU tier", "disk": "disk tier"}


def bound_words(bound: HitBound) -> str:
    """``the larger of 25% of the predicted share, 2.0 points and 3 binomial standard errors over the step's
    requests``."""
    return (f"the larger of {bound.relative:.0%} of the predicted share, {num(bound.floor * 100)} points and "
            f"{bound.z:g} binomial standard errors over the step's requests")


def gap_words(gap: TierGap) -> str:
    """``c8 CPU tier: predicted 25.7%, measured 11.6% of prompt tokens (0.45x; allowed ±6.4 points at 601
    requests)``."""
    times = f"{gap.measured / gap.predicted:.2f}x; " if gap.predicted > 0 else ""
    return (f"{gap.label or f'step {gap.step}'} {TIER_WORDS.get(gap.tier, gap.tier)}: predicted {pct(gap.predicted)}, "
            f"measured {pct(gap.measured)} of prompt tokens ({times}allowed ±{num(gap.bound * 100)} points at "
            f"{gap.requests:,} requests)")


def hit_check_words(check: HitCheck) -> str:
    """The ``hit-prediction-agrees`` item in words: the shares beyond the bound, or that there are none."""
    if check.gaps:
        return (f"arm {check.arm}: {len(check.gaps)} tier share(s) of a step's prompt tokens lie outside their bound "
                f"around the LRU prediction on the request plan ({bound_words(check.bound)}): "
                + "; ".join(gap_words(g) for g in check.gaps)
                + ". The tiers did not hold what the plan needs them to (capacity, eviction or a warm start), or "
                "the load differs from the plan")
    return (f"arm {check.arm}: at each of {check.steps} steps every tier's measured share of prompt tokens lies "
            f"within its bound around the LRU prediction on the request plan ({bound_words(check.bound)})")


def fit_evidence(item: FitItem) -> str:
    """What the report says for one fit-screen item."""
    if item.hit_check is not None:
        return hit_check_words(item.hit_check)
    return item.evidence
