"""Section 5, time to decision: the load the sequential design used to reach its verdict, next to the error rate it
kept, from a short run of the decision benchmark (``python -m tools.decision_bench``, in a subprocess).

The benefit case (a real 16 GiB CPU-tier benefit) should decide in at most half of the fixed horizon's load
(:data:`SHARE_GOAL`, on the whole rollout: the baseline's reference steps and the tier arm's), and the A/A case (an
inert tier) should keep its false-go rate at or below 5 % (:data:`FALSE_GO_GOAL`, the observed rate; its exact
95 % interval is in the note, and says how far so few rollouts can vouch for it). The tier arm's own share and the
benefit case's power are shown beside them, without goals.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from tools.perf.benches import run_bench
from tools.perf.table import Goal, Row

SECTION = "5 time to decision"
TOOL = "tools.decision_bench"
SHARE_GOAL = Goal("<=", 50.0, "%")
FALSE_GO_GOAL = Goal("<=", 5.0, "%")
BENEFIT_SHARE = "benefit: load used / fixed horizon, whole rollout"
FALSE_GO = "A/A (inert tier): false go"
FIGURES: list[tuple[str, Goal | None]] = [
    (BENEFIT_SHARE, SHARE_GOAL), ("benefit: tier arm's load used / its fixed horizon", None),
    ("benefit: go (power)", None), (FALSE_GO, FALSE_GO_GOAL), ("A/A: load used / fixed horizon, whole rollout", None)]


def _pct(x: float | None) -> float | None:
    return None if x is None else 100.0 * x


def _rate_note(go: dict[str, Any]) -> str:
    if not go.get("n"):
        return "no rollout judged"
    return f"{go['k']}/{go['n']} rollouts, exact 95% interval [{100 * go['low']:.0f}%, {100 * go['high']:.0f}%]"


def _case_note(case: dict[str, Any]) -> str:
    verdicts = ", ".join(f"{k} {v}" for k, v in case["verdicts"].items())
    lost = f"; {case['lost']} lost (an arm failed)" if case["lost"] else ""
    return f"{case['runs']} rollouts: {verdicts}{lost}"


def rows_from_figures(figures: dict[str, Any]) -> list[Row]:
    """The section's rows from the benchmark's ``--figures-json`` (a case with no judged rollout: rows say so)."""
    cases = figures.get("cases", {})
    design = figures.get("design", {})
    how = (f"sequential looks {design.get('looks')} from {design.get('min_fraction')} of each "
           f"{figures.get('step_s')} s step")
    out: list[Row] = []
    benefit, aa = cases.get("benefit"), cases.get("aa")
    if benefit and benefit["runs"]:
        out += [Row(SECTION, BENEFIT_SHARE, TOOL, _pct(benefit["rollout_share"]), "%", SHARE_GOAL,
                    note=f"{_case_note(benefit)}; {how}"),
                Row(SECTION, FIGURES[1][0], TOOL, _pct(benefit["arm_share"]), "%",
                    note="the baseline's steps are the reference every tier arm of a rollout shares"),
                Row(SECTION, FIGURES[2][0], TOOL, _pct(benefit["go"]["rate"]), "%", note=_rate_note(benefit["go"]))]
    else:
        out += [Row(SECTION, name, TOOL, None, goal=goal, error="no benefit rollout was judged")
                for name, goal in FIGURES[:3]]
    if aa and aa["runs"]:
        out += [Row(SECTION, FALSE_GO, TOOL, _pct(aa["go"]["rate"]), "%", FALSE_GO_GOAL,
                    note=f"{_rate_note(aa['go'])}; {_case_note(aa)}"),
                Row(SECTION, FIGURES[4][0], TOOL, _pct(aa["rollout_share"]), "%")]
    else:
        out += [Row(SECTION, name, TOOL, None, goal=goal, error="no A/A rollout was judged")
                for name, goal in FIGURES[3:]]
    return out


def decision_rows(benefit_runs: int, aa_runs: int, timeout_s: float, step_s: float = 30.0,
                  seed: int = 2000) -> list[Row]:
    """Run the benefit and A/A cases and return the section's rows (each row says why when it has no figure)."""
    with tempfile.TemporaryDirectory(prefix="perf-decision-") as tmp:
        figures_path = Path(tmp) / "figures.json"
        run = run_bench(TOOL, ["--out", str(Path(tmp) / "runs"), "--cases", "benefit", "aa",
                               "--runs", str(benefit_runs), "--aa-runs", str(aa_runs), "--step-s", f"{step_s!r}",
                               "--seed", str(seed), "--figures-json", str(figures_path)], timeout_s)
        why = run.failure
        if why is None:
            try:
                return rows_from_figures(json.loads(figures_path.read_text(encoding="utf-8")))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                why = f"the benchmark's figures could not be read: {exc}"
    return [Row(SECTION, name, TOOL, None, goal=goal, error=why) for name, goal in FIGURES]
