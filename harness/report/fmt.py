"""Number formatting shared by the HTML and Markdown reports: a value that is None never prints as 0, one that is not
finite (NaN, infinity) prints as ``invalid``, never as ``nan``/``inf``, and none prints more than about a dozen
digits (``1e+308 ms``, not a 309-digit number)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal

from harness.schema.summary import ArmSummary, HitTokens, StepSummary, Summary

MISSING = "missing"
INVALID = "invalid"  # a value that is not a finite number
HUGE = 1e12  # at and above this magnitude a number is written in scientific notation (``1.2e+15``)

_TITLES = {"go": "GO", "hold": "HOLD", "no-go": "NO-GO", "slo-unmet": "SLO UNMET", "failed": "RUN FAILED"}


def verdict_title(summary: Summary) -> str:
    """The banner's headline, e.g. ``GO: ship cpu``, ``NO-GO: keep the baseline`` or ``SLO UNMET: …``."""
    word = _TITLES.get(summary.verdict, summary.verdict.upper())
    if summary.verdict == "go" and summary.recommended_arm:
        return f"{word}: ship {summary.recommended_arm}"
    if summary.verdict == "hold":
        return f"{word}: inconclusive, keep the current configuration"
    if summary.verdict == "no-go":
        return f"{word}: keep the baseline"
    if summary.verdict == "slo-unmet":
        return f"{word}: every arm breaks the same budget, the baseline included (the SLO's problem, not the tier's)"
    return word


def _bad(value: float | None) -> bool:
    return value is None or (isinstance(value, float) and not math.isfinite(value))


def _absent(value: float | None, none: str) -> str:
    """What a value that is no number prints as: ``none`` for None, :data:`INVALID` for NaN or infinity."""
    return none if value is None else INVALID


def ms(value: float | None, none: str = MISSING) -> str:
    """Milliseconds with sensible precision: ``1,234 ms``, ``87.5 ms``, ``0.42 ms`` (``1e+308 ms`` when huge)."""
    if value is None or _bad(value):
        return _absent(value, none)
    if abs(value) >= HUGE:
        return f"{value:.3g} ms"
    if abs(value) >= 100:
        return f"{value:,.0f} ms"
    if abs(value) >= 1:
        return f"{value:.1f} ms"
    return f"{value:.2f} ms"


def num(value: float | None, digits: int = 1, none: str = MISSING) -> str:
    """A plain number with thousands separators (scientific when huge)."""
    if value is None or _bad(value):
        return _absent(value, none)
    if abs(value) >= HUGE:
        return f"{value:.3g}"
    if float(value).is_integer() and digits == 0:
        return f"{int(value):,}"
    return f"{value:,.{digits}f}"


def pct(value: float | None, digits: int = 1, none: str = MISSING) -> str:
    """A share (0..1) as a percentage."""
    if value is None or _bad(value):
        return _absent(value, none)
    if abs(value) >= HUGE:
        return f"{value * 100:.3g}%"
    return f"{value * 100:.{digits}f}%"


def ratio(value: float | None, none: str = "n/a") -> str:
    """A ratio such as ``0.65x``."""
    if value is None or _bad(value):
        return _absent(value, none)
    if abs(value) >= HUGE:
        return f"{value:.3g}x"
    return f"{value:.2f}x"


def gib(value: float | int | None, none: str = MISSING) -> str:
    """Bytes as GiB (or MiB below 1 GiB), number and unit joined by a no-break space."""
    if value is None or _bad(float(value)):
        return _absent(None if value is None else float(value), none)
    if abs(value) >= HUGE * (1 << 30):
        return f"{value / (1 << 30):.3g}\u00a0GiB"
    if abs(value) >= 1 << 30:
        return f"{value / (1 << 30):,.1f}\u00a0GiB"
    return f"{value / (1 << 20):,.1f}\u00a0MiB"


def tokens(value: int | None, none: str = MISSING) -> str:
    """A token count with thousands separators."""
    if value is None:
        return none
    return f"{Decimal(value):.3g}" if abs(value) >= HUGE else f"{value:,}"  # Decimal: ints beyond any float


def top_step(arm: ArmSummary) -> StepSummary | None:
    """The arm's last (highest-load) step, where the tail matters most."""
    return arm.steps[-1] if arm.steps else None


def hit_rate(hits: HitTokens) -> float | None:
    """Share of prompt tokens served from any cache tier (None when a source is missing)."""
    return hits.hit_rate()


def hit_missing(hits: HitTokens) -> list[str]:
    """What is missing from a hit-token count: the looked-for series, or the sources that are None."""
    if hits.missing:
        return list(hits.missing)
    return [f"{key} hit tokens" for key in ("gpu", "cpu", "disk", "miss") if getattr(hits, key) is None]


def missing_names(hits: Sequence[HitTokens]) -> list[str]:
    """The union of what is missing from several hit-token counts, in first-seen order."""
    names: list[str] = []
    for h in hits:
        names.extend(n for n in hit_missing(h) if n not in names)
    return names


def arm_missing(arm: ArmSummary) -> list[str]:
    """Every series looked for and not found in any of the arm's steps (hit sources and server figures)."""
    names: list[str] = []
    for step in arm.steps:
        for name in [*hit_missing(step.hit_tokens), *step.server.missing]:
            if name not in names:
                names.append(name)
    return names


def step_label(arm: ArmSummary, index: int | None) -> str:
    """The label of the arm's step with this index (``""`` for None, the bare index if unknown)."""
    if index is None:
        return ""
    for step in arm.steps:
        if step.index == index:
            return step.label
    return str(index)


def join(items: Sequence[str], limit: int = 6) -> str:
    """A short comma list: the first ``limit`` items and a count of the rest."""
    shown = ", ".join(items[:limit])
    rest = len(items) - limit
    return shown + (f" and {rest} more" if rest > 0 else "")
