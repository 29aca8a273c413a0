"""Each arm's steady-state samples per step, rebuilt from a run directory the way the decision builds them.

The same selection as :func:`harness.decision.summarize.rebuild_summary`: the request rows of counted attempts inside
their journaled spans (:func:`harness.rundir.attempts.counted_rows`), one :class:`harness.decision.evaluate.ArmData`
per arm with its steps' spans and planned steps, and its :meth:`~harness.decision.evaluate.ArmData.samples` (MSER-5
cut, :mod:`harness.analysis.steady`). The calibration computes its intervals from these with the decision's own
function (:func:`harness.decision.evidence.improvement`), and the truth pools the long rollouts' samples.
"""

from __future__ import annotations

from pathlib import Path

from harness.config import load_scenario
from harness.decision.evaluate import ArmData, planned_steps
from harness.decision.evidence import StepSample
from harness.rundir.attempts import counted_entries, counted_rows
from harness.rundir.journal import read_step_entries
from harness.rundir.layout import RunDir
from harness.schema.summary import StepSummary


def arm_samples(run_dir: Path) -> dict[str, dict[int, StepSample]]:
    """Arm name -> step index -> the arm's steady-state sample of that step (arms in the scenario's order)."""
    from harness.analysis import derive_latencies, load_requests

    run = RunDir(run_dir)
    scenario = load_scenario(run.scenario)
    journaled = read_step_entries(run)
    entries = [e for e in counted_entries(e for e in journaled if not e.drill) if e.step >= 0]
    df = counted_rows(derive_latencies(load_requests(run.root)), journaled)
    planned = planned_steps(scenario)
    out: dict[str, dict[int, StepSample]] = {}
    for arm in scenario.arms:
        spans = {e.step: e for e in entries if e.arm == arm.name}
        steps = [StepSummary(index=i, label=f"step {i}", duration_s=(e.end_ns - e.start_ns) / 1e9)
                 for i, e in sorted(spans.items())]
        data = ArmData(arm.name, df[df["arm"] == arm.name] if not df.empty else df, steps,
                       spans={i: (e.start_ns, e.end_ns) for i, e in spans.items()}, planned=planned)
        out[arm.name] = data.samples(scenario.slo)
    return out
