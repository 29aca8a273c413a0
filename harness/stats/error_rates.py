"""Error rates fixed before the run: one comparison's one-sided alpha in its rule's family.

Each comparison is a one-sided test at ``alpha_each`` read off a two-sided ``1 - 2 alpha_each`` interval.
``alpha_each`` divides the rule's ``alpha`` by the size of its family (steps for a regression rule, steps x measures
for earns-its-keep: Holm's procedure, whose first step, Bonferroni, decides "at least one") and by the number of
sequential looks when steps may end early (a Bonferroni group-sequential design: valid whatever look ends the
step). The decision rules, the sequential looks and the power section of ``harness plan`` all read them from here.
"""

from __future__ import annotations


def keep_alpha(alpha: float, n_steps: int, n_measures: int, looks: int) -> float:
    """One comparison's one-sided error in the earns-its-keep family."""
    return alpha / max(1, n_steps * n_measures * max(1, looks))


def regression_alpha(alpha: float, n_steps: int, looks: int) -> float:
    """One step's one-sided error in a regression rule's family."""
    return alpha / max(1, n_steps * max(1, looks))
