"""The noise floor (the baseline re-run at the end: A/A) and the summary's note on how figures were computed.

Arms run one after another, so drift (clocks, thermals, neighbours; in the simulator, its seeded per-run drift)
reads as effect. With ``rules.noise_floor.rerun_baseline`` the baseline's configuration runs again last, as arm
``<baseline>~aa``. Each (step, measure) of the re-run is compared with the baseline, with an interval. The drift an
A/A ratio *shows* is the distance from 1 of its interval's end nearest to 1 (1.0 when the interval contains 1: what
the intervals already cover as sampling noise is not counted twice). A step's floor is the largest drift shown at
that step (as a ratio >= 1), and ``factor`` the largest over the steps. Every comparison at a step then needs its
effect beyond ``threshold x floor`` (an improvement, a breach of the regression limit) or within
``threshold / floor`` (a pass of the regression limit): an effect inside the drift the run itself showed at that
load does not decide (the bounds, and what a floor above a rule's tolerance means: :mod:`harness.decision.bounds`).

Drift the run can put on the host is not the engine's: an A/A step whose baseline or re-run was over its
host-contention budget (:mod:`harness.decision.rules.load_host`: the simulator behind the wall clock, a saturated
load generator) sets no floor. Its figures stay in ``items`` (flagged) and ``host_contended`` says why, with the
figures; a comparison at that step is held against the largest floor the clean A/A steps showed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from harness.config.scenario import Scenario
from harness.decision.evaluate import ArmData
from harness.decision.evidence import improvement
from harness.decision.rules.load_host import contended_pairs
from harness.schema.intervals import RatioCI
from harness.schema.summary import NoiseFloor, NoiseFloorItem, Statistics
from harness.stats.intervals import QUANTILE_METHOD, RATIO_METHOD_NOTE

AA_SUFFIX = "~aa"


def aa_name(baseline: str) -> str:
    """The A/A re-run's arm name ('~' cannot appear in a scenario's arm names, so it never collides)."""
    return f"{baseline}{AA_SUFFIX}"


def noise_floor(scenario: Scenario, tables: Mapping[str, Any], base: ArmData, df: pd.DataFrame,
                confidence: float, spans: Mapping[int, tuple[int, int]] | None = None) -> NoiseFloor | None:
    """The A/A comparison, when the run has a re-run of the baseline (``spans``: the re-run's journaled step spans,
    so its steady-state window is cut as every arm's is; the planned steps are the baseline's)."""
    name = aa_name(base.name)
    table = tables.get(name)
    if table is None:
        if scenario.rules.noise_floor.rerun_baseline:
            return NoiseFloor(arm=name, message="The baseline re-run (A/A) has no measured steps: no noise floor.")
        return None
    rerun = ArmData(name, df[df["arm"] == name] if not df.empty else df, list(table.steps), spans=dict(spans or {}),
                    planned=base.planned)
    slo = scenario.slo
    items: list[NoiseFloorItem] = []
    mine, theirs = rerun.samples(slo), base.samples(slo)
    contended = {i: why for i, why in contended_pairs(rerun.steps, name, (base.name, base.steps)).items()
                 if i in theirs}
    for step in rerun.steps:
        if step.index not in theirs:
            continue
        for measure in scenario.rules.noise_floor.measures:
            ci = improvement(measure, mine[step.index], theirs[step.index], confidence)
            items.append(NoiseFloorItem(step=step.index, measure=measure, interval=ci,
                                        host_contended=step.index in contended))
    shown: list[tuple[NoiseFloorItem, float]] = []
    for item in items:
        drift = drift_shown(item.interval)
        if drift is not None and not item.host_contended:
            shown.append((item, drift))
    aside = "".join(f"; step {i} sets no floor, host-contended ({why})" for i, why in sorted(contended.items()))
    if not shown:
        what = ("No A/A step was clean of host contention" if contended and any(
            drift_shown(i.interval) is not None for i in items) else
            "The A/A re-run gave no comparable figures (no resolved interval)")
        return NoiseFloor(arm=name, items=items, steps=rerun.steps, host_contended=contended,
                          message=f"{what}: no noise floor{aside}.")
    per_step: dict[int, float] = {}
    for item, drift in shown:
        per_step[item.step] = round(max(per_step.get(item.step, 1.0), drift), 4)
    worst, factor = max(shown, key=lambda pair: pair[1])
    if factor <= 1.0:
        text = ("Every A/A interval contains 1: the re-run shows no drift beyond the sampling noise the intervals "
                "already cover")
    else:
        text = (f"Largest A/A drift beyond sampling noise: {factor:.3f}x, {worst.measure} at step {worst.step} "
                f"({worst.interval.ratio:.3f}x [{worst.interval.lo:.3f}, {worst.interval.hi:.3f}] at "
                f"{worst.interval.confidence:.0%}); effects inside a step's drift do not decide")
    return NoiseFloor(arm=name, items=items, steps=rerun.steps, factor=round(factor, 4), per_step=per_step,
                      message=f"{text}{aside}.", host_contended=contended)


def drift_shown(ci: RatioCI) -> float | None:
    """The drift an A/A interval shows beyond sampling noise (>= 1), None when unresolved."""
    if not ci.resolved or ci.lo is None or ci.hi is None or ci.lo <= 0:
        return None
    if ci.lo > 1.0:
        return ci.lo
    if ci.hi < 1.0:
        return 1.0 / ci.hi
    return 1.0


def statistics_note(scenario: Scenario, looks: int) -> Statistics:
    """How the summary's intervals and tests were computed (shown in every report)."""
    rules = scenario.rules
    seq = scenario.steps.sequential
    sequential = (f"steps may end at {looks} looks ({', '.join(f'{f:.0%}' for f in seq.fractions())} of their "
                  "planned duration) once every decision at the step is settled; each test's error is divided by "
                  "the number of looks (Bonferroni group-sequential design)") if seq.enabled else None
    alpha = rules.earns_keep.alpha if rules.earns_keep is not None else 0.05
    return Statistics(confidence=rules.confidence, alpha=alpha, quantile_method=QUANTILE_METHOD,
                      ratio_method=RATIO_METHOD_NOTE,
                      multiplicity="one-sided tests; alpha shared over steps (regression) and steps x measures "
                      "(earns its keep: Holm, whose first step is Bonferroni)", sequential=sequential)
