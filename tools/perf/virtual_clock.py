"""Section 6, the virtual clock: the demo's whole rollout on the virtual clock (wall seconds) and the rate of A/A
decision-benchmark rollouts (rollouts per wall minute over ``jobs`` processes), each in a subprocess.

* ``python -m harness run scenarios/demo-sim.yaml --virtual --out TMP``: timed whole (imports included), goal
  <= 20 s (:data:`DEMO_GOAL`, issue 33);
* ``python -m tools.decision_bench.calibrate --only decision --aa-runs N --benefit-runs 0 --jobs J
  --decision-step-s 33`` (the verdict rows' step length, as ``make decision-bench`` runs them): the A/A rollouts'
  count over the benchmark's own wall time (``calibration.json``), goal >= 26.7 per minute (:data:`AA_RATE_GOAL`:
  400 A/A rollouts in 15 minutes on 2 cores; docs/statistics.md, "Calibration").
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from harness.core.exit_codes import COMPLETED_ROLLOUT
from tools.perf.benches import run_bench
from tools.perf.table import Goal, Row

SECTION = "6 virtual clock"
DEMO = "demo rollout on the virtual clock (harness run --virtual)"
AA_RATE = "A/A decision-bench rollouts on the virtual clock"
DEMO_SCENARIO = Path("scenarios/demo-sim.yaml")
DEMO_GOAL = Goal("<=", 20.0, "s")
AA_RATE_GOAL = Goal(">=", 400 / 15, "rollouts/min")
DECISION_STEP_S = 33.0  # the Makefile's DECISION_STEP_S: 10 modelled seconds cannot resolve the p99 rule


def demo_row(timeout_s: float) -> Row:
    """The demo's virtual-clock rollout, wall seconds."""
    tool = "harness run --virtual"
    with tempfile.TemporaryDirectory(prefix="perf-virtual-") as tmp:
        run = run_bench("harness", ["run", str(DEMO_SCENARIO), "--virtual", "--out", tmp], timeout_s)
    # a no-go, hold or slo-unmet is measured too
    if run.failure is not None and run.returncode not in COMPLETED_ROLLOUT:
        return Row(SECTION, DEMO, tool, None, goal=DEMO_GOAL, error=run.failure)
    return Row(SECTION, DEMO, tool, run.wall_s, "s", goal=DEMO_GOAL,
               note=f"exit {run.returncode} (the verdict's code); imports and reports included")


def aa_rate_row(runs: int, jobs: int, timeout_s: float) -> Row:
    """A/A rollouts per wall minute over ``jobs`` processes."""
    tool = "tools.decision_bench.calibrate"
    with tempfile.TemporaryDirectory(prefix="perf-aa-") as tmp:
        run = run_bench(tool, ["--out", tmp, "--only", "decision", "--aa-runs", str(runs), "--benefit-runs", "0",
                               "--jobs", str(jobs), "--decision-step-s", f"{DECISION_STEP_S:g}",
                               "--max-minutes", f"{timeout_s / 60.0:g}"], timeout_s + 60.0)
        if run.failure is not None:
            return Row(SECTION, AA_RATE, tool, None, goal=AA_RATE_GOAL, error=run.failure)
        try:
            body = json.loads((Path(tmp) / "calibration.json").read_text(encoding="utf-8"))
            aa = next(d for d in body["decisions"] if d["case"] == "aa")
            rate = 60.0 * (aa["n"] + aa["lost"]) / float(body["wall_s"])
        except (OSError, ValueError, KeyError, StopIteration, ZeroDivisionError) as exc:
            return Row(SECTION, AA_RATE, tool, None, goal=AA_RATE_GOAL,
                       error=f"the benchmark's figures could not be read: {exc}")
    return Row(SECTION, AA_RATE, tool, rate, "rollouts/min", goal=AA_RATE_GOAL,
               note=f"{aa['n']} judged, {aa['lost']} lost, {jobs} jobs, {DECISION_STEP_S:g} s steps, "
                    f"{body['wall_s']:.0f} s wall; "
                    f"{aa['seconds_per_rollout'] or 0:.1f} s per rollout in one worker")


def virtual_rows(aa_runs: int, jobs: int, timeout_s: float) -> list[Row]:
    """The section's rows."""
    return [demo_row(timeout_s), aa_rate_row(aa_runs, jobs, timeout_s)]
