"""The windows chart with a budget judged at p95: the windows' p95 drawn beside their p99 and named in the title,
legend and caption; a p99-only summary's chart reads as before."""

from __future__ import annotations

from harness.report.charts_time import other_percentiles, windows_chart
from harness.schema.summary import Summary
from harness.schema.windows import WindowQuantile
from tests.support.sample import sample_summary


def _with_p95(summary: Summary) -> Summary:
    arms = []
    for arm in summary.arms:
        wins = [w.model_copy(update={"percentiles": {"ttft_p95": WindowQuantile(
            value_ms=(w.ttft_p99_ms or 0.0) * 0.6, ci=w.ttft_p99_ci)}}) for w in arm.windows]
        arms.append(arm.model_copy(update={"windows": wins}))
    return summary.model_copy(update={"arms": arms})


def test_a_p95_budgets_windows_are_drawn_and_named() -> None:
    plain = sample_summary()
    summary = _with_p95(plain)
    assert other_percentiles(summary.arms[0], "ttft") == [95.0] and other_percentiles(summary.arms[0], "itl") == []
    chart = windows_chart(summary)
    svg = str(chart.svg)
    assert "Thinner dashed series: each window's p95" in chart.caption
    assert "p95 (a budget's percentile)" in svg and "p99, p95 dashed TTFT (ms)" in svg
    before = windows_chart(plain)
    assert before.caption in chart.caption and "p95" not in before.caption and "p95" not in str(before.svg)
    assert len(svg) > len(str(before.svg))  # the extra series is drawn
