"""The bounds a comparison's interval is held against: a rule's limit with the step's noise floor inside it.

The noise floor (:mod:`harness.decision.noise_floor`) is the drift the baseline's re-run showed at a step, a ratio
>= 1 (1: none measured). An effect inside it does not decide, so

* a regression rule "no worse than ``max_ratio``" **passes** when its interval's upper end is at most
  ``max_ratio / floor`` and **breaches** when its lower end exceeds ``max_ratio x floor``;
* earns its keep is **shown** when a lower end reaches ``min_improvement x floor`` and shown **short** when every
  upper end lies below it.

When the floor exceeds a regression rule's tolerance (``max_ratio / floor < 1``) a pass would need the arm shown
*better* than the baseline: the rule then says it cannot rule the regression out at this floor (reason code
``floor-above-tolerance``, unresolved) and what would (a quieter host, a longer A/A) instead of silently asking for an
improvement; an interval that does clear ``max_ratio / floor`` still passes (an improvement beyond the drift).
Every message names the bounds as numbers, and :class:`~harness.schema.summary.RuleResult` carries them
(``pass_bound``, ``breach_bound``, ``floor``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

FLOOR_ABOVE_TOLERANCE: Final = "floor-above-tolerance"


def floor_at(floors: Mapping[int, float] | None, step: int) -> float:
    """The noise floor at a step: that step's A/A distance, else the largest measured, else 1 (no A/A)."""
    if not floors:
        return 1.0
    return floors.get(step, max(floors.values()))


@dataclass(frozen=True)
class RegressionBounds:
    """A regression rule's limit at one step's noise floor."""

    limit: float
    floor: float = 1.0

    @property
    def pass_bound(self) -> float:
        """The upper end a pass needs at most."""
        return self.limit / self.floor

    @property
    def breach_bound(self) -> float:
        """The lower end a breach needs to exceed."""
        return self.limit * self.floor

    @property
    def floor_above_tolerance(self) -> bool:
        """The floor exceeds the rule's tolerance: a pass would need a shown improvement."""
        return self.pass_bound < 1.0

    def text(self) -> str:
        """``passes if the upper end <= 0.951 (1.10 / floor 1.157); breaches if the lower end > 1.273 (1.10 x
        1.157)``; without a floor ``passes if the upper end <= 1.100; breaches if the lower end > 1.100``."""
        if self.floor <= 1.0:
            return (f"passes if the upper end <= {self.pass_bound:.3f}; breaches if the lower end > "
                    f"{self.breach_bound:.3f}")
        return (f"passes if the upper end <= {self.pass_bound:.3f} ({self.limit:.2f} / floor {self.floor:.3f}); "
                f"breaches if the lower end > {self.breach_bound:.3f} ({self.limit:.2f} x {self.floor:.3f})")

    def cannot_rule_out(self) -> str:
        """Why the rule cannot pass at this floor without a shown improvement, and what would change that."""
        return (f"the noise floor {self.floor:.3f} exceeds the rule's tolerance {self.limit:.2f}, so a pass would "
                f"need the upper end <= {self.pass_bound:.3f}, an improvement shown beyond the drift: a regression "
                f"up to {self.limit:.2f}x cannot be ruled out at this floor; a quieter host (less drift between the "
                "baseline and its A/A re-run) or a longer A/A, with longer steps (a narrower A/A interval), would "
                "lower the floor")

    def limit_text(self) -> str:
        """How the effect table's two limits were made: ``1.10 x floor 1.157; 1.10 / floor 1.157``."""
        if self.floor <= 1.0:
            return f"max_ratio {self.limit:.2f}"
        return f"max_ratio {self.limit:.2f} x floor {self.floor:.3f}; {self.limit:.2f} / floor {self.floor:.3f}"


@dataclass(frozen=True)
class KeepBounds:
    """Earns its keep's limit at one step's noise floor."""

    min_improvement: float
    floor: float = 1.0

    @property
    def need(self) -> float:
        """The lower end an improvement needs at least (and the upper end below which it is shown short)."""
        return self.min_improvement * self.floor

    def text(self) -> str:
        """``shown if the lower end >= 1.113 (1.05 x floor 1.060); short if the upper end < 1.113``."""
        how = f" ({self.min_improvement:.2f} x floor {self.floor:.3f})" if self.floor > 1.0 else ""
        return f"shown if the lower end >= {self.need:.3f}{how}; short if the upper end < {self.need:.3f}"
