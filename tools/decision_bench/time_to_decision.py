"""Time to decision: how much of the fixed horizon's load the sequential design used to reach its verdict, next to
the error rate it kept (``python -m tools.decision_bench --figures-json FILE``; ``make perf`` section 5).

Per case, over the rollouts that were judged (an arm that failed is a lost run, counted apart):

* ``rollout_share``: load seconds of every measured step (the baseline's reference steps and the tier arm's) over
  their planned seconds -- what the verdict cost;
* ``arm_share``: the same for the tier arm's steps alone (the baseline's steps are a reference every tier arm of a
  rollout shares);
* ``go``: rollouts that came out ``go``, with an exact 95% binomial interval (Clopper-Pearson): for the A/A case
  every ``go`` is a false go, for the benefit case its power.
"""

from __future__ import annotations

from typing import Any, Protocol


class _Outcome(Protocol):
    case: str
    verdict: str
    planned_s: float
    used_s: float
    arm_planned_s: float
    arm_used_s: float


def _share(used: float, planned: float) -> float | None:
    return used / planned if planned > 0 else None


def binomial(k: int, n: int) -> dict[str, Any]:
    """``k`` of ``n`` with its exact 95% interval."""
    from scipy.stats import binomtest

    if n == 0:
        return {"k": 0, "n": 0, "rate": None, "low": None, "high": None}
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
    return {"k": k, "n": n, "rate": k / n, "low": float(ci.low), "high": float(ci.high)}


def case_figures(outcomes: list[Any], judged: Any) -> dict[str, dict[str, Any]]:
    """Per case: runs judged and lost, go (rate and interval), rollout and tier-arm load shares."""
    out: dict[str, dict[str, Any]] = {}
    for case in sorted({o.case for o in outcomes}):
        every = [o for o in outcomes if o.case == case]
        mine = [o for o in every if judged(o)]
        out[case] = {
            "runs": len(mine), "lost": len(every) - len(mine),
            "go": binomial(sum(o.verdict == "go" for o in mine), len(mine)),
            "rollout_share": _share(sum(o.used_s for o in mine), sum(o.planned_s for o in mine)),
            "arm_share": _share(sum(o.arm_used_s for o in mine), sum(o.arm_planned_s for o in mine)),
            "verdicts": {v: sum(o.verdict == v for o in mine) for v in sorted({o.verdict for o in mine})},
        }
    return out
