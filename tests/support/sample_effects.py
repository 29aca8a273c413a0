"""Effect rows for the sample summary (tests of the forest plot and the effect table): every outcome and every edge.

:func:`with_effects` gives each tier arm of a summary (every arm but the first) deterministic
:class:`~harness.schema.summary.EffectRow` s over its own step labels: resolved intervals that clear, straddle or
miss their limit, unresolved ones (no bound at all, a lower bound only), an infinite upper bound, a point beyond
the widest axis on either side, and one deciding row per arm. ``repeat`` repeats the set over made-up extra steps
(many rows). Nothing is measured here: these rows exist to be drawn.
"""

from __future__ import annotations

import math

from harness.schema.intervals import RatioCI
from harness.schema.summary import ArmSummary, EffectRow, Summary

_IMPROVE = (1.0689, None, "min_improvement 1.05 x noise floor 1.018")
_HARM = (1.12, 1.08, "max_ratio 1.10 x floor 1.018; 1.10 / floor 1.018")
# (test, measure, step position, ratio, lo, hi, resolved, outcome, deciding); positions wrap over the arm's steps.
_CPU = (
    ("improvement", "output_tokens_per_s", 0, 1.02, None, None, False, "not judged", False),
    ("improvement", "ttft_p95", 0, 1.04, 0.97, 1.12, True, "not settled", False),
    ("improvement", "output_tokens_per_s", 1, 1.10, 1.075, 1.14, True, "improvement shown", False),
    ("improvement", "output_tokens_per_s", 2, 1.22, 1.15, 1.29, True, "improvement shown", True),
    ("improvement", "ttft_p95", 2, 1.53, 1.40, math.inf, True, "improvement shown", False),
    ("harm", "ttft_p99", 0, 0.95, 0.90, None, False, "not judged", False),
    ("harm", "ttft_p99", 2, 0.65, 0.58, 0.73, True, "within limit", False),
)
_TIERED = (
    ("improvement", "output_tokens_per_s", 1, 0.97, 0.93, 1.01, True, "short of the limit", False),
    ("improvement", "output_tokens_per_s", 2, 0.88, 0.84, 0.92, True, "worse shown", False),
    ("improvement", "ttft_p95", 1, 0.12, 0.08, 0.19, True, "worse shown", False),
    ("harm", "itl_p99", 0, 7.5, 6.0, 9.4, True, "harm shown", False),
    ("harm", "itl_p99", 1, 3.1, 2.8, 3.5, True, "host-contended", False),
    ("harm", "itl_p99", 2, 1.35, 1.22, 1.49, True, "harm shown", True),
)


def _row(arm: ArmSummary, versus: str, spec: tuple[object, ...], label: str, step: int) -> EffectRow:
    test, measure, _, ratio, lo, hi, resolved, outcome, deciding = spec
    limit, pass_limit, how = _IMPROVE if test == "improvement" else _HARM
    return EffectRow.model_validate({
        "rule": "earns-its-keep" if test == "improvement" else f"{measure}-vs-baseline", "test": test,
        "measure": measure, "step": step, "label": label, "versus": versus,
        "interval": RatioCI(ratio=ratio, lo=lo, hi=hi, resolved=resolved, confidence=0.99,
                            method="percentile bootstrap"),
        "limit": limit, "pass_limit": pass_limit, "limit_text": how, "floor": 1.018, "outcome": outcome,
        "deciding": deciding, "n": 724, "n_versus": 475,
        "source": f"requests.parquet, step {step} ({label}): 724 vs 475 ({versus}) requests"})


def arm_effects(arm: ArmSummary, position: int, versus: str, repeat: int = 1) -> list[EffectRow]:
    """The rows of the tier arm at ``position`` (1: the cpu set, else the tiered set), improvements first."""
    specs = _CPU if position == 1 else _TIERED
    labels = [s.label or f"c{s.concurrency}" for s in arm.steps] or ["c8"]
    rows = []
    for r in range(repeat):
        for spec in specs:
            where = int(spec[2]) % len(labels)
            label = labels[where] if r == 0 else f"{labels[where]}-again{r}"
            rows.append(_row(arm, versus, spec, label, where + r * len(labels)))
    return sorted(rows, key=lambda e: (e.test != "improvement", e.step))


def with_effects(summary: Summary, repeat: int = 1) -> Summary:
    """``summary`` with effect rows on every arm but the first (the baseline)."""
    if not summary.arms:
        return summary
    versus = summary.arms[0].name
    arms = [a if i == 0 else a.model_copy(update={"effects": arm_effects(a, i, versus, repeat)})
            for i, a in enumerate(summary.arms)]
    return summary.model_copy(update={"arms": arms})
