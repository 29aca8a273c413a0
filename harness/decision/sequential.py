"""Sequential steps: a tier arm's step ends at a look once every decision at that step is settled.

At each look (``steps.sequential``: ``looks`` analyses from ``min_fraction`` of the planned duration to all of it)
the step's records so far are judged with the same functions as the final summary, at the same error rates (each
test's error already divided by the number of looks: a Bonferroni group-sequential design, valid whichever look
ends the step):

* every regression rule at this step is resolved against the baseline's same step (pass or breach);
* earns-its-keep at this step is settled: some measure's improvement clears the threshold, or every measure's
  interval lies below it;
* every budget rule's step percentile is resolved against its budget, at ``confidence`` tightened by the number of
  looks (so the final, untightened judgement cannot come out differently).

The baseline's step (the reference every look compares with) ends once every percentile the comparisons use is
resolved with room to spare (1.25 x the requests that just resolve it) and every budget is settled; its A/A re-run
always runs its full duration. A look that fails for any reason does not stop the step. A look reads only the
records of the step's current attempt; a reference step reads the rows that count, as the summary does
(:func:`harness.rundir.attempts.counted_rows`: its counted attempt, inside that attempt's journaled span).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from harness.config.arms import Arm
from harness.config.rules import LatencyMetric
from harness.config.scenario import Scenario
from harness.config.steps import StepLevel
from harness.decision.evidence import LOWER_IS_BETTER, StepSample, improvement, regression_step, step_sample
from harness.rundir.attempts import counted_entries, counted_rows, row_attempts
from harness.rundir.entries import StepEntry
from harness.rundir.journal import read_step_entries
from harness.rundir.layout import RunDir
from harness.schema.intervals import QuantileCI
from harness.stats.error_rates import keep_alpha, regression_alpha
from harness.stats.intervals import interval_from_sorted, min_samples_to_resolve

if TYPE_CHECKING:
    from harness.analysis.load import PartCache

BASELINE_MARGIN = 1.25


def _frame(parts: list[Path], cache: PartCache | None = None) -> pd.DataFrame:
    from harness.analysis.latency import derive_latencies
    from harness.analysis.load import parts_table, table_to_frame

    return derive_latencies(table_to_frame(parts_table(parts, cache)))


def _parts(run: RunDir, arm: str, prefix: str) -> list[Path]:
    from harness.rundir.parts import find_parts

    return find_parts(run.records_dir(arm), prefix)


def reference_rows(run: RunDir, arm: str, step: int, prefix: str) -> tuple[pd.DataFrame, StepEntry] | None:
    """The rows that count of ``arm``'s finished ``step`` (its parts start with ``prefix``) and the entry that
    journaled them; None where the step has no journal entry yet, or its counted attempt was cut short."""
    entries = counted_entries(e for e in read_step_entries(run, strict=False) if e.key == (arm, step)
                              and not e.drill)
    if not entries or any(e.partial for e in entries):
        return None
    df = _frame(_parts(run, arm, prefix))
    return counted_rows(df, entries), entries[-1]


def _step_interval(sample: StepSample, metric: LatencyMetric, q: float, confidence: float) -> QuantileCI:
    """The step-level percentile interval as the summary computes it (ITL: every gap, requests as sample size), over
    the whole step (budgets judge every request, the transient too)."""
    values = sample.budget_metric(metric)
    if metric == "itl" and sample.gaps is not None:
        return interval_from_sorted(np.sort(sample.gaps), q, confidence, n_effective=len(values))
    return interval_from_sorted(np.sort(values[~np.isnan(values)]), q, confidence)


class StepLooker:
    """The look callback of one tier arm's step (``StepRun.on_look``)."""

    def __init__(self, scenario: Scenario, run: RunDir, arm: Arm, arm_index: int, step: int, prefix: str,
                 level: StepLevel, attempt: int = 1) -> None:
        self.scenario = scenario
        self.run = run
        self.arm = arm
        self.step = step
        self.attempt = attempt
        self.prefix = prefix
        self.level = level
        self.base_name = scenario.arms[0].name
        self.prev_name = scenario.arms[max(0, arm_index - 1)].name
        self.started_ns = time.perf_counter_ns()
        self._refs: dict[str, StepSample | None] = {}
        self._parts_read: PartCache = {}  # this step's parts, each read once over the looks

    def looks_s(self) -> list[float]:
        """Seconds after the step's start at which to look (all but the last, which is the planned end)."""
        seq = self.scenario.steps.sequential
        duration = self.level.duration_s
        if not seq.enabled or duration is None:
            return []
        return [f * duration for f in seq.fractions()[:-1]]

    def _reference(self, arm: str) -> StepSample | None:
        if arm not in self._refs:
            found = reference_rows(self.run, arm, self.step, self.prefix)
            self._refs[arm] = step_sample(found[0], found[1].duration_s, self.scenario.slo,
                                          start_ns=found[1].start_ns, end_ns=found[1].end_ns) if found else None
        return self._refs[arm]

    def __call__(self, elapsed_s: float) -> str | None:
        """A reason to end the step now, or None to go on."""
        if self.arm.name == self.base_name:
            return self._baseline_settled(elapsed_s)
        base = self._reference(self.base_name)
        prev = self._reference(self.prev_name)
        mine = self._current(elapsed_s) if base is not None and prev is not None else None
        if base is None or prev is None or mine is None:
            return None
        reasons = [self._regression(mine, base), self._keep(mine, prev), self._budgets(mine)]
        if any(r is None for r in reasons):
            return None
        return f"settled at {elapsed_s:.1f} s of {self.level.duration_s:g} s ({mine.n} requests): " + \
            "; ".join(r for r in reasons if r)

    def _current(self, elapsed_s: float) -> StepSample | None:
        """This attempt's records of the step so far (an earlier, interrupted attempt's are left out)."""
        df = _frame(_parts(self.run, self.arm.name, self.prefix), self._parts_read)
        if df.empty:
            return None
        df = df[(row_attempts(df) == self.attempt) & (df["send_ns"].to_numpy() >= self.started_ns)]
        return step_sample(df, elapsed_s, self.scenario.slo)

    def _baseline_settled(self, elapsed_s: float) -> str | None:
        """The baseline's step is settled when every percentile the comparisons use is resolved with room to spare
        (``BASELINE_MARGIN`` x the samples that just resolve it) and every budget is settled."""
        mine = self._current(elapsed_s)
        if mine is None:
            return None
        rules = self.scenario.rules
        looks = self.scenario.steps.sequential.looks
        n_levels = len(self.scenario.steps.levels)
        need = 0
        for reg in (r for r in rules.regression if not r.dry_run):
            conf = 1.0 - 2.0 * regression_alpha(reg.alpha, n_levels, looks)
            need = max(need, reg.min_samples, min_samples_to_resolve(reg.percentile / 100.0, conf))
        keep = rules.earns_keep
        if keep is not None:
            conf = 1.0 - 2.0 * keep_alpha(keep.alpha, n_levels, len(keep.measures), looks)
            for measure in keep.measures:
                if measure in LOWER_IS_BETTER:  # a latency percentile, e.g. ttft_p95
                    pct = float(measure.rpartition("_p")[2])
                    need = max(need, keep.min_samples, min_samples_to_resolve(pct / 100.0, conf))
        target = int(BASELINE_MARGIN * need)
        if mine.n < target:
            return None
        budgets = self._budgets(mine)
        if budgets is None:
            return None
        return (f"settled at {elapsed_s:.1f} s of {self.level.duration_s:g} s: {mine.n} requests resolve the "
                f"percentiles every comparison uses ({target} needed)" + (f"; {budgets}" if budgets else ""))

    def _regression(self, mine: StepSample, base: StepSample) -> str | None:
        rules = self.scenario.rules
        looks = self.scenario.steps.sequential.looks
        said = []
        for reg in rules.regression:
            if reg.dry_run or (reg.arms is not None and self.arm.name not in reg.arms):
                continue
            verdict = regression_step(reg, self.step, self.level.label, mine, base,
                                      regression_alpha(reg.alpha, len(self.scenario.steps.levels), looks))
            if verdict.result.status not in ("pass", "breach"):
                return None
            said.append(f"{reg.label} {verdict.result.status}")
        return ", ".join(said)

    def _keep(self, mine: StepSample, prev: StepSample) -> str | None:
        keep = self.scenario.rules.earns_keep
        if keep is None:
            return ""
        if mine.n < keep.min_samples or prev.n < keep.min_samples:
            return None
        alpha_each = keep_alpha(keep.alpha, len(self.scenario.steps.levels), len(keep.measures),
                                self.scenario.steps.sequential.looks)
        below = 0
        for measure in keep.measures:
            ci = improvement(measure, mine, prev, 1.0 - 2.0 * alpha_each)
            if not ci.resolved or ci.lo is None or ci.hi is None:
                continue
            if ci.lo >= keep.min_improvement:
                return f"earns its keep ({measure} {ci.ratio:.2f}x, lower bound {ci.lo:.2f})"
            if ci.hi < keep.min_improvement:
                below += 1
        return "no improvement on any measure" if below == len(keep.measures) else None

    def _budgets(self, mine: StepSample) -> str | None:
        rules = self.scenario.rules
        confidence = 1.0 - (1.0 - rules.confidence) / self.scenario.steps.sequential.looks
        said = []
        for rule in rules.budgets:
            if rule.dry_run or (rule.arms is not None and self.arm.name not in rule.arms):
                continue
            budget = rule.budget_ms or self.scenario.slo.budget_ms(rule.metric)
            if budget is None:
                continue
            ci = _step_interval(mine, rule.metric, rule.percentile / 100.0, confidence)
            if ci.hi is not None and ci.hi <= budget:
                said.append(f"{rule.label} within")
            elif ci.lo is not None and ci.lo > budget:
                said.append(f"{rule.label} over")
            else:
                return None
        return ", ".join(said)
