"""The noise floor in words: its figure, what it was measured on (the A/A comparisons, their steps, intervals and
request counts) and what it means for the comparisons, from :class:`~harness.schema.summary.NoiseFloor`."""

from __future__ import annotations

from harness.report.fmt import ratio
from harness.schema.summary import NoiseFloor


def sentence(text: str) -> str:
    """``text`` as a sentence: first letter upper case, ending with a full stop (empty stays empty)."""
    text = text.strip()
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def _basis(nf: NoiseFloor) -> str:
    """``9 A/A ratios at 3 steps, each with its 95% interval, n=422-498 requests per side``."""
    counted = [i for i in nf.items if not i.host_contended and i.interval.resolved]
    if not counted:
        return "no clean A/A ratio"
    steps = len({i.step for i in counted})
    levels = sorted({i.interval.confidence for i in counted})
    level = "/".join(f"{c:.0%}" for c in levels)
    sizes = [n for i in counted for n in (i.interval.n, i.interval.n_versus) if n is not None]
    n = "" if not sizes else (f", n={min(sizes):,}" if min(sizes) == max(sizes)
                              else f", n={min(sizes):,}-{max(sizes):,}") + " requests per side"
    return f"{len(counted)} A/A ratios at {steps} step{'s' if steps != 1 else ''}, each with its {level} interval{n}"


def _per_step(nf: NoiseFloor) -> str:
    """``; per step: c8 1.00x, c16 1.06x, c32 1.00x`` where the steps' floors differ, else empty."""
    if len(set(nf.per_step.values())) < 2:
        return ""
    labels = {s.index: s.label for s in nf.steps}
    return "; per step: " + ", ".join(f"{labels.get(i) or f'step {i}'} {ratio(f)}"
                                      for i, f in sorted(nf.per_step.items()))


def noise_floor_line(nf: NoiseFloor) -> str:
    """``Noise floor: 1.16x (baseline A/A re-run: the largest drift beyond sampling noise over 9 A/A ratios ...).``
    and the decision's own sentence (what it means: the largest drift and that effects inside it do not decide, or
    that every A/A interval contains 1); without a floor, why there is none."""
    why = sentence(nf.message)
    if nf.factor is None:
        return f"No noise floor. {why}".strip()
    head = (f"Noise floor: {ratio(nf.factor)} (baseline A/A re-run: the largest drift beyond sampling noise over "
            f"{_basis(nf)}{_per_step(nf)}).")
    return f"{head} {why}".strip()
