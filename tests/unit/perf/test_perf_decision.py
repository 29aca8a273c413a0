"""Section 5 of ``make perf``: time to decision from the decision benchmark's figures, with its goals, and rows that
say why when the benchmark gave nothing."""

from __future__ import annotations

from typing import Any

from tools.decision_bench.time_to_decision import binomial, case_figures
from tools.perf import decision
from tools.perf.benches import BenchRun
from tools.perf.decision import BENEFIT_SHARE, FALSE_GO, decision_rows, rows_from_figures


class _O:
    def __init__(self, case: str, verdict: str, used: float, planned: float, arm_used: float,
                 arm_planned: float) -> None:
        self.case, self.verdict = case, verdict
        self.used_s, self.planned_s, self.arm_used_s, self.arm_planned_s = used, planned, arm_used, arm_planned


def _judged(o: Any) -> bool:
    return bool(o.verdict != "failed")


def test_case_figures_share_and_rates() -> None:
    outs = [_O("benefit", "go", 30, 40, 10, 20), _O("benefit", "hold", 40, 40, 20, 20),
            _O("aa", "hold", 20, 20, 10, 10), _O("aa", "failed", 0, 20, 0, 10)]
    figures = case_figures(outs, _judged)
    assert figures["benefit"]["rollout_share"] == 70 / 80 and figures["benefit"]["arm_share"] == 30 / 40
    assert figures["benefit"]["go"]["k"] == 1 and figures["aa"]["lost"] == 1 and figures["aa"]["runs"] == 1
    assert binomial(0, 24)["high"] < 0.15 and binomial(0, 0)["rate"] is None


def test_rows_carry_the_goals_and_judge_them() -> None:
    outs = [_O("benefit", "go", 18, 40, 8, 20)] * 4 + [_O("aa", "hold", 20, 20, 10, 10)] * 20
    rows = {r.figure: r for r in rows_from_figures({"design": {"looks": 4, "min_fraction": 0.25}, "step_s": 10.0,
                                                    "cases": case_figures(outs, _judged)})}
    assert rows[BENEFIT_SHARE].value == 45.0 and rows[BENEFIT_SHARE].passed is True
    assert rows[FALSE_GO].value == 0.0 and rows[FALSE_GO].passed is True and "0/20 rollouts" in rows[FALSE_GO].note
    slow = [_O("benefit", "go", 36, 40, 10, 20)]
    (share, *_rest) = rows_from_figures({"cases": case_figures(slow, _judged)})
    assert share.passed is False


def test_a_failed_benchmark_leaves_every_row_unmeasured_with_the_reason(monkeypatch: Any) -> None:
    monkeypatch.setattr(decision, "run_bench", lambda *a, **k: BenchRun(["x"], 4, "boom: no simulator", 1.0))
    rows = decision_rows(1, 1, timeout_s=5)
    assert rows and all(not r.measured and "exit status 4" in r.why_missing for r in rows)
    assert [r.goal is not None for r in rows].count(True) == 2
