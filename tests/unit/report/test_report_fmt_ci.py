"""Percentiles carry n and an interval; an unresolved one is marked, never printed as if exact."""

from __future__ import annotations

from harness.report import fmt_ci
from harness.schema.intervals import Percentiles, QuantileCI, RatioCI
from harness.schema.summary import RuleResult
from tests.support.sample import sample_summary


def test_resolved_percentile_reads_value_interval_and_n() -> None:
    p = Percentiles(p99=2310.0, count=412, p99_ci=QuantileCI(lo=2105.0, hi=2544.0, resolved=True, n=412))
    view = fmt_ci.pct_view(p, "p99")
    assert view.resolved and not view.unresolved
    assert view.text == "2,310 ms [2,105–2,544] n=412"
    assert view.parts == ["[2,105–2,544]", "n=412"]


def test_unresolved_percentile_reads_at_least_never_the_value() -> None:
    ci = QuantileCI(lo=812.0, hi=None, resolved=False, n=40, note="unresolved: 40 samples cannot bound p99")
    view = fmt_ci.pct_view(Percentiles(p99=950.0, count=40, p99_ci=ci), "p99")
    assert view.unresolved and view.kind == "at-least"
    assert view.text == "≥ 812 ms (n=40, unresolved)"
    assert "950" not in view.text and "sample p99 950 ms" in view.note
    at_most = fmt_ci.interval_view(3.0, QuantileCI(lo=None, hi=5.0, n=4), pct="p50")
    assert at_most.text == "≤ 5.0 ms (n=4, unresolved)"
    neither = fmt_ci.interval_view(3.0, QuantileCI(n=2))
    assert neither.text == "unresolved (n=2)"


def test_no_samples_and_no_interval() -> None:
    assert fmt_ci.pct_view(Percentiles(), "p99").text == "no samples"
    legacy = fmt_ci.pct_view(Percentiles(p99=120.0, count=900), "p99")
    assert legacy.kind == "point" and legacy.text == "120 ms (n=900, no interval)"
    assert fmt_ci.point_view(5400.0, 96).unresolved
    assert not fmt_ci.point_view(5400.0, 1000).unresolved


def test_ratio_views_and_rule_evidence() -> None:
    assert fmt_ci.ratio_view(RatioCI(ratio=0.65, lo=0.58, hi=0.73, resolved=True)).text == "0.65x [0.58–0.73]"
    assert fmt_ci.ratio_view(RatioCI(ratio=0.93)).text == "unresolved (point 0.93x)"
    assert fmt_ci.ratio_view(None).text == "n/a"
    holm = RatioCI(ratio=1.05, lo=0.87, hi=1.27, resolved=True, confidence=0.98333)
    assert fmt_ci.ratio_view(holm).text == "1.05x [0.87–1.27] at 98.3%"
    rule = RuleResult(rule="r", kind="regression", status="pass", message="m", threshold=1.1,
                      interval=RatioCI(ratio=0.65, lo=0.58, hi=0.73, resolved=True))
    assert fmt_ci.evidence_text(rule) == "0.65x [0.58–0.73] vs 1.10x"
    budget = RuleResult(rule="b", kind="budget", status="breach", message="m", threshold=2000.0,
                        shared_with_baseline=True)
    assert fmt_ci.evidence_text(budget) == "threshold 2,000 ms (the baseline breaks it too)"


def test_legend_and_load_time_come_from_the_summary() -> None:
    s = sample_summary()
    legend = fmt_ci.legend(s)
    assert "95% confidence interval" in legend and "order-statistic" in legend and "368" in legend
    assert "Holm" in legend and "percentile bootstrap" in legend
    assert fmt_ci.load_time_text(s) == ("499 s of 540 s planned; sequential steps saved 8% of load time (2 of 9 "
                                        "steps ended early)")
    assert fmt_ci.samples_to_resolve("p99") == 368
